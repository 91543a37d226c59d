"""`marin compare` on real nano runs: docs/evaluation.md's worked example (two learning rates, three seeds
each), its commands run verbatim, the trainings shortened to 20 steps (`MARIN_COMPARE_TRAIN_STEPS`)."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
RUN = "marin run experiments/tutorials/compare_models.py"
COMPARE = "marin compare evaluations/nano-lr6e-4-seed0 evaluations/nano-lr6e-4-seed1 evaluations/nano-lr6e-4-seed2 evaluations/nano-lr6e-3-seed0 evaluations/nano-lr6e-3-seed1 evaluations/nano-lr6e-3-seed2"  # noqa: E501
COMPARE_JSON = "marin compare evaluations/nano-lr6e-4-seed0 evaluations/nano-lr6e-4-seed1 evaluations/nano-lr6e-4-seed2 evaluations/nano-lr6e-3-seed0 evaluations/nano-lr6e-3-seed1 evaluations/nano-lr6e-3-seed2 --format json"  # noqa: E501
COMPARE_CSV = "marin compare evaluations/nano-lr6e-4-seed0 evaluations/nano-lr6e-4-seed1 evaluations/nano-lr6e-4-seed2 evaluations/nano-lr6e-3-seed0 evaluations/nano-lr6e-3-seed1 evaluations/nano-lr6e-3-seed2 --format csv"  # noqa: E501
POWER = "marin compare evaluations/nano-lr6e-4-seed0 evaluations/nano-lr6e-4-seed1 evaluations/nano-lr6e-4-seed2 evaluations/nano-lr6e-3-seed0 evaluations/nano-lr6e-3-seed1 evaluations/nano-lr6e-3-seed2 --metric marin_story_endings/acc --power 0.1"  # noqa: E501
SEED_NOISE = "marin compare evaluations/nano-lr6e-4-seed0 evaluations/nano-lr6e-4-seed1"
TWO_MODELS = "marin compare evaluations/nano-lr6e-4-seed0 evaluations/nano-lr6e-3-seed0"
TRAIN_STEPS = "20"  # the tutorial's 40 halved: a tenfold learning rate still wins over every seed


def _sh(command: str, prefix: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MARIN_TOKENIZER",)}
    env.update(MARIN_PREFIX=str(prefix), PATH=f"{REPO / '.venv' / 'bin'}:{env.get('PATH', '')}")
    env["MARIN_COMPARE_TRAIN_STEPS"] = TRAIN_STEPS
    return subprocess.run(
        command,
        shell=True,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
        start_new_session=True,
    )


@pytest.fixture(scope="module")
def prefix(tmp_path_factory) -> Path:
    """The tutorial's 6 trained models and their evaluations (two learning rates x three seeds)."""
    prefix = tmp_path_factory.mktemp("compare")
    done = _sh(RUN, prefix)
    assert done.returncode == 0, done.stderr[-3000:]
    return prefix


def _rows(table: str, after: str = "") -> dict[str, list[str]]:
    section = table[table.index(after) :] if after else table
    rows = {}
    for line in section.split("\n\n", 2)[1 if after else 0].splitlines():
        if line.startswith("| "):
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            rows.setdefault(cells[0], cells)
    return rows


def test_configurations_that_truly_differ_are_told_apart_over_their_seeds(prefix):
    done = _sh(COMPARE, prefix)
    assert done.returncode == 0, done.stderr
    table = done.stdout
    overview = _rows(table, "Configurations (")
    assert overview[""][1:] == ["nano-lr6e-4 (3 seeds)", "nano-lr6e-3 (3 seeds)"]
    assert overview["model.optimizer.learning_rate"][1:] == ["0.0006", "0.006"]
    assert overview["model.seed"][1:] == ["0, 1, 2", "0, 1, 2"]
    assert "model.optimizer.weight_decay" not in overview and "model.num_train_steps" not in overview
    assert "sd " in overview["bpb"][1] and "n=3x" in overview["bpb"][1]
    differences = _rows(table, "Differences between configurations")
    # a tenfold learning rate: lower bits per byte over every seed, and lower is better
    assert differences["bpb"][-1] == "nano-lr6e-3" and differences["bpb"][-2].startswith("two-level t")
    # story endings: no configuration is better (both at chance on 50 items)
    assert differences["marin_story_endings/acc"][-1] == ""
    assert "nano-lr6e-4: 3 replicates (seed=0; seed=1; seed=2), recognised from their keys" in table


def test_two_seeds_of_one_configuration_are_never_called_better(prefix):
    done = _sh(SEED_NOISE, prefix)
    assert done.returncode == 0, done.stderr
    assert "Differences between configurations" not in done.stdout
    assert "Differences between these models" not in done.stdout
    seed_noise = _rows(done.stdout, "Seed noise")
    assert seed_noise["metric"] == ["metric", "a", "b", "a - b", "95% interval (items)"]  # no p, no better
    assert "their differences are seed noise, not effects" in done.stdout


def test_two_single_runs_are_two_models_with_seed_variance_unmeasured(prefix):
    done = _sh(TWO_MODELS, prefix)
    assert done.returncode == 0, done.stderr
    differences = _rows(done.stdout, "Differences between these models")
    assert differences["metric"][-1] == "better model"
    assert (
        differences["bpb"][-2] == "paired bootstrap"
        and differences["marin_story_endings/acc"][-2] == "mcnemar"
    )
    assert "seed variance is unmeasured" in done.stdout


def test_compare_writes_csv_and_json(prefix):
    as_json = json.loads(_sh(COMPARE_JSON, prefix).stdout)
    assert [c["label"] for c in as_json["configurations"]] == ["nano-lr6e-4", "nano-lr6e-3"]
    assert as_json["params"]["model.optimizer.learning_rate"] == [0.0006, 0.006]
    bpb = next(d for d in as_json["differences"] if d["metric"] == "bpb")
    assert bpb["kind"] == "configuration" and bpb["significant"] and bpb["ci95"][0] > 0
    assert bpb["better"] == "nano-lr6e-3" and bpb["p_adjusted"] >= bpb["p_value"]
    mean = next(
        c
        for c in as_json["configuration_metrics"]
        if c["metric"] == "bpb" and c["configuration"] == "nano-lr6e-3"
    )
    assert mean["seeds"] == 3 and mean["seed_noise"] == "measured" and mean["seed_sd"] > 0
    rows = list(csv.DictReader(io.StringIO(_sh(COMPARE_CSV, prefix).stdout)))
    assert {"param", "compute", "metric", "configuration", "difference (configuration)"} <= {
        r["kind"] for r in rows
    }
    assert any(
        r["kind"] == "metric" and r["name"] == "bpb" and float(r["ci95_lo"]) < float(r["value"]) for r in rows
    )


def test_power_says_how_many_seeds_a_story_endings_difference_needs(prefix):
    done = _sh(POWER, prefix)
    assert done.returncode == 0, done.stderr
    row = _rows(done.stdout, "Power against a difference of 0.1")["marin_story_endings/acc"]
    assert row[5] == "3" and row[6].endswith("%")  # the seeds compared, and their power now


def test_compare_of_something_that_is_not_an_evaluation_is_one_error_line(prefix):
    done = _sh("marin compare evaluations/nano-lr6e-4-seed0 no/such-step", prefix)
    assert done.returncode == 2 and done.stderr.startswith("error: 'no/such-step' is neither")
    assert len(done.stderr.strip().splitlines()) == 1


def test_compare_shows_each_models_model_and_hardware_flops_apart_with_their_ratio(prefix):
    as_json = json.loads(_sh(TWO_MODELS + " --format json", prefix).stdout)
    rows = _rows(_sh(TWO_MODELS, prefix).stdout)
    for i, evaluation in enumerate(as_json["evaluations"]):
        flops = as_json["compute"][evaluation["label"]]
        assert flops["model"] > 0 and flops["hardware"] > flops["model"]
        assert rows["model FLOPs"][i + 1] == f"{flops['model']:.3g}"
        assert rows["hardware FLOPs"][i + 1] == f"{flops['hardware']:.3g}"
        assert rows["model / hardware FLOPs"][i + 1] == f"{flops['ratio']:.2%}"
    # the two runs differ only in learning rate: the same model FLOPs, whatever the hardware spent
    first, second = (as_json["compute"][e["label"]] for e in as_json["evaluations"])
    assert first["model"] == second["model"]
