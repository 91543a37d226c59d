"""`marin compare` with replicates, as a terminal runs it: configurations over their seeds, seed noise named
as such, adjusted p-values, power, and one-line errors. The evaluations are stand-in steps with real key
records whose per-item scores are drawn from a known truth (tests/marin/evaluation/stand_in.py)."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.marin.evaluation.stand_in import run_stand_ins, simulated_scores

MARIN = str(Path(sys.executable).parent / "marin")


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict[str, str]:
    """Two configurations (lr 1e-3: 50% accuracy, lr 1e-2: 65%) with 3 seeds each, 300 items, plus one
    evaluation of other items."""
    rng = np.random.default_rng(0)
    base = rng.uniform(20, 40, 60)
    runs = {}
    for lr, p in ((1e-3, 0.5), (1e-2, 0.65)):
        for seed in range(3):
            runs[f"evaluations/lr{lr:g}-seed{seed}"] = (lr, seed, *simulated_scores(rng, p, 0.05, 300, base))
    runs["evaluations/other-items"] = (1e-3, 0, *simulated_scores(rng, 0.5, 0.05, 200, base))
    return run_stand_ins(tmp_path_factory.mktemp("replicates"), runs)


def _marin(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "MARIN_TRACEBACK"}
    return subprocess.run(
        [MARIN, *args], capture_output=True, text=True, timeout=300, env=env, start_new_session=True
    )


def _rows(table: str, header: str) -> dict[str, list[str]]:
    section = table[table.index(header) :]
    rows = {}
    for line in section.splitlines()[2:]:
        if not line.startswith("| "):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip("| ").split(" | ")]
        rows.setdefault(cells[0], cells)
    return rows


def test_replicates_are_recognised_and_configurations_compared_over_their_seeds(outputs):
    seeds = [outputs[f"evaluations/lr{lr}-seed{s}"] for lr in ("0.001", "0.01") for s in range(3)]
    done = _marin("compare", *seeds)
    assert done.returncode == 0, done.stderr
    table = done.stdout
    assert "| lr0.001 (3 seeds) | lr0.01 (3 seeds) |" in table
    assert "| model.seed | 0, 1, 2 | 0, 1, 2 |" in table  # the seeds, not a parameter that differs
    assert "eval.model.step" not in table
    acc = _rows(table, "Differences between configurations")["story_endings/acc"]
    assert acc[-1] == "lr0.01" and acc[-2].startswith("two-level t (seeds, items)")  # 65% beats 50%
    assert "adjusted for the 3 tests of this table by Holm" in table
    assert "3 replicates (seed=0; seed=1; seed=2), recognised from their keys" in table


def test_two_seeds_of_one_configuration_are_seed_noise_and_never_better(outputs):
    done = _marin("compare", outputs["evaluations/lr0.001-seed0"], outputs["evaluations/lr0.001-seed1"])
    assert done.returncode == 0, done.stderr
    assert "Seed noise (a - b between replicates of one configuration" in done.stdout
    assert "replicates of one configuration (lr0.001): their differences are seed noise" in done.stdout
    assert "better" not in done.stdout.split("Seed noise", 1)[1].split("\n\n", 2)[1]
    as_json = json.loads(_marin("compare", *list(outputs.values())[:2], "--format", "json").stdout)
    assert {d["kind"] for d in as_json["differences"]} == {"seed noise"}
    assert all(d["better"] is None and d["p_value"] is None for d in as_json["differences"])


def test_single_runs_are_compared_as_models_and_say_seed_variance_is_unmeasured(outputs):
    done = _marin("compare", outputs["evaluations/lr0.001-seed0"], outputs["evaluations/lr0.01-seed0"])
    assert done.returncode == 0, done.stderr
    assert "Differences between these models" in done.stdout
    assert (
        "seed variance is unmeasured" in done.stdout
        and "replicate(train_lm(...), seeds=(0, 1, 2))" in done.stdout
    )
    assert "Differences between configurations" not in done.stdout


def test_benjamini_hochberg_on_request_is_named_in_the_table_and_the_json(outputs):
    seeds = [outputs[f"evaluations/lr{lr}-seed{s}"] for lr in ("0.001", "0.01") for s in range(3)]
    assert (
        "by Benjamini-Hochberg (false discovery rate)" in _marin("compare", *seeds, "--adjust", "bh").stdout
    )
    as_json = json.loads(_marin("compare", *seeds, "--adjust", "bh", "--format", "json").stdout)
    assert as_json["adjustment"] == "bh"
    configuration = next(d for d in as_json["differences"] if d["metric"] == "story_endings/acc")
    assert (
        configuration["kind"] == "configuration" and configuration["p_adjusted"] >= configuration["p_value"]
    )
    rows = list(csv.DictReader(io.StringIO(_marin("compare", *seeds, "--format", "csv").stdout)))
    kinds = {r["kind"] for r in rows}
    assert {"param", "metric", "configuration", "difference (configuration)", "signal_to_noise"} <= kinds
    mean = next(r for r in rows if r["kind"] == "configuration" and r["name"] == "story_endings/acc")
    assert mean["seeds"] == "3" and float(mean["ci95_lo"]) < float(mean["value"]) < float(mean["ci95_hi"])


def test_power_says_how_many_seeds_a_difference_needs(outputs):
    seeds = [outputs[f"evaluations/lr{lr}-seed{s}"] for lr in ("0.001", "0.01") for s in range(3)]
    done = _marin("compare", *seeds, "--metric", "story_endings/acc", "--power", "0.03")
    assert done.returncode == 0, done.stderr
    row = _rows(done.stdout, "Power against a difference of 0.03")["story_endings/acc"]
    assert int(row[7]) > 3  # 0.03 at 300 items and this seed spread needs more than the 3 seeds compared


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--metric", "story_endings/ac"),
            "error: --metric: unknown metric 'story_endings/ac' in these evaluations: "
            "did you mean 'story_endings/acc'?",
        ),
        (
            ("--power", "0.03"),
            "error: --power needs the seed spread, which one run per configuration does not measure",
        ),
    ],
)
def test_mistakes_are_one_error_line(outputs, args, message):
    done = _marin("compare", outputs["evaluations/lr0.001-seed0"], outputs["evaluations/lr0.01-seed0"], *args)
    assert done.returncode == 2 and done.stderr.startswith(message), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_different_items_need_unpaired(outputs):
    a, b = outputs["evaluations/lr0.01-seed0"], outputs["evaluations/other-items"]
    done = _marin("compare", a, b, "--metric", "story_endings/acc")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "scored different items on 'story_endings/acc' (100 item(s) only in the first" in done.stderr
    assert "pass --unpaired" in done.stderr
    unpaired = _marin("compare", a, b, "--metric", "story_endings/acc", "--unpaired")
    assert unpaired.returncode == 0 and "unpaired bootstrap" in unpaired.stdout


def test_each_replicate_names_its_seeds_and_a_seed_left_at_its_default():
    from marin.evaluation.comparison import Evaluated, Group
    from marin.evaluation.replicates import Configuration

    def member(
        seeds: dict,
    ) -> Evaluated:  # upstream steps are named for their seed, as replicate() names them
        return Evaluated("e", "e", {}, {}, configuration=Configuration("same", seeds))

    first = member({"checkpoints/m-0: seed": 0})  # its random cut's seed at the default: not in its key
    second = member({"checkpoints/m-1: seed": 1, "curated/cut-1: scorer.seed": 1})
    assert Group("m", (first, second)).seeds == ["seed=0, scorer.seed=default", "seed=1, scorer.seed=1"]
