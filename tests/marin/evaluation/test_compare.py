"""`marin compare` on two real evaluations: docs/evaluation.md's worked example, its commands run verbatim."""

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
COMPARE = "marin compare evaluations/nano-lr6e-4 evaluations/nano-lr6e-3"
COMPARE_JSON = "marin compare evaluations/nano-lr6e-4 evaluations/nano-lr6e-3 --format json"
COMPARE_CSV = "marin compare evaluations/nano-lr6e-4 evaluations/nano-lr6e-3 --format csv"


def _sh(command: str, prefix: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MARIN_TOKENIZER",)}
    env.update(MARIN_PREFIX=str(prefix), PATH=f"{REPO / '.venv' / 'bin'}:{env.get('PATH', '')}")
    return subprocess.run(
        command, shell=True, cwd=REPO, env=env, capture_output=True, text=True, timeout=1200
    )


@pytest.fixture(scope="module")
def prefix(tmp_path_factory) -> Path:
    prefix = tmp_path_factory.mktemp("compare")
    done = _sh(RUN, prefix)
    assert done.returncode == 0, done.stderr[-3000:]
    return prefix


def test_compare_shows_the_differing_parameter_metrics_with_intervals_and_paired_differences(prefix):
    done = _sh(COMPARE, prefix)
    assert done.returncode == 0, done.stderr
    table = done.stdout
    first = table[: table.index("Paired differences")]
    rows = {line.split(" | ")[0].strip("| "): line for line in first.splitlines() if line.startswith("| ")}
    # only what differs between the two runs: the model step, and its learning rate
    assert "model.optimizer.learning_rate" in rows and "0.0006" in rows["model.optimizer.learning_rate"]
    assert "model.optimizer.weight_decay" not in rows and "model.num_train_steps" not in rows
    assert "n=50" in rows["marin_story_endings/acc"] and "[" in rows["bpb"]
    paired = table[table.index("Paired differences") :]
    bpb = next(line for line in paired.splitlines() if line.startswith("| bpb |"))
    # a tenfold learning rate: far apart on the same documents, and lower bpb is better: b (6e-3) is
    cells = [c.strip() for c in bpb.strip("| ").split(" | ")]
    assert cells[-3:-1] == ["paired bootstrap", "yes"] and cells[-1] == cells[2]
    acc = next(line for line in paired.splitlines() if line.startswith("| marin_story_endings/acc |"))
    assert acc.endswith("| mcnemar | no |  |")  # not significant: neither is better


def test_compare_writes_csv_and_json(prefix):
    as_json = json.loads(_sh(COMPARE_JSON, prefix).stdout)
    assert [e["label"].split("-")[1] for e in as_json["evaluations"]] == ["lr6e", "lr6e"]
    assert as_json["params"]["model.optimizer.learning_rate"] == [0.0006, 0.006]
    difference = next(d for d in as_json["differences"] if d["metric"] == "bpb")
    assert difference["significant"] and difference["ci95"][0] > 0 and difference["n"] > 0
    assert difference["better"] == difference["b"]  # a's bpb is higher, and lower is better
    rows = list(csv.DictReader(io.StringIO(_sh(COMPARE_CSV, prefix).stdout)))
    assert {r["kind"] for r in rows} == {"param", "compute", "metric", "difference"}
    assert any(
        r["kind"] == "metric" and r["name"] == "bpb" and float(r["ci95_lo"]) < float(r["value"]) for r in rows
    )


def test_compare_of_something_that_is_not_an_evaluation_is_one_error_line(prefix):
    done = _sh("marin compare evaluations/nano-lr6e-4 no/such-step", prefix)
    assert done.returncode == 2 and done.stderr.startswith("error: 'no/such-step' is neither")
    assert len(done.stderr.strip().splitlines()) == 1


def test_compare_shows_each_models_model_and_hardware_flops_apart_with_their_ratio(prefix):
    as_json = json.loads(_sh(COMPARE_JSON, prefix).stdout)
    table = _sh(COMPARE, prefix).stdout
    rows = {
        line.split(" | ")[0].strip("| "): line.split(" | ")[1:]
        for line in table.splitlines()
        if line.startswith("| ")
    }
    for i, evaluation in enumerate(as_json["evaluations"]):
        flops = as_json["compute"][evaluation["label"]]
        model_dir = next(
            p
            for p in (prefix / "checkpoints").glob("*")
            if (p / ".artifact.json").exists()
            and json.loads((p / ".artifact.json").read_text())["result"].get("flops") == flops
        )
        assert flops["model"] > 0 and flops["hardware"] > flops["model"] and model_dir.is_dir()
        assert rows["model FLOPs"][i].strip(" |") == f"{flops['model']:.3g}"
        assert rows["hardware FLOPs"][i].strip(" |") == f"{flops['hardware']:.3g}"
        assert rows["model / hardware FLOPs"][i].strip(" |") == f"{flops['ratio']:.2%}"
    # the two runs differ only in learning rate: the same model FLOPs, whatever the hardware spent
    first, second = (as_json["compute"][e["label"]] for e in as_json["evaluations"])
    assert first["model"] == second["model"]
