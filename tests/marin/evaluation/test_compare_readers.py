"""Every reader of the result schema shows exact match, a LoRA setting left at its defaults, and the model
config values a key leaves out: `marin compare` (md, csv, json) and Marina (evaluations page, evaluation page,
configurations of replicates). The checkpoint curves' share is tests/marin/evaluation/test_results.py's."""

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

from tests.marin.evaluation.stand_in import Extras, run_stand_ins, simulated_scores

MARIN = str(Path(sys.executable).parent / "marin")
LLAMA = {"hidden_dim": 32, "num_layers": 2, "rope_theta": 10000.0, "max_seq_len": 64}
QWEN3 = {"hidden_dim": 32, "num_layers": 2, "rope_theta": 1000000.0, "max_seq_len": 128}
LORA = {"rank": 8, "alpha": 16.0, "dropout": 0.0, "targets": ["q_proj", "v_proj"]}


@pytest.fixture(scope="module")
def prefix(tmp_path_factory) -> Path:
    """A LoRA run of a Llama and a full fine-tune of a Qwen3 (one seed each: their keys name neither
    rope_theta, a default, nor LoRA's fields, at theirs), and a configuration with 2 seeds; all scored by
    exact match too."""
    rng = np.random.default_rng(1)
    base = rng.uniform(20, 40, 30)
    runs, extras = {}, {}
    for name, lr, seed, config, key in (
        ("evaluations/lora", 1e-3, 0, {"architecture": "llama", "model": LLAMA, "lora": LORA}, {"lora": {}}),
        (
            "evaluations/full",
            1e-3,
            0,
            {"architecture": "qwen3", "model": QWEN3},
            {"model": {"architecture": "qwen3"}},
        ),
        ("evaluations/rep-seed0", 3e-3, 0, {"architecture": "llama", "model": LLAMA}, {}),
        ("evaluations/rep-seed1", 3e-3, 1, {"architecture": "llama", "model": LLAMA}, {}),
    ):
        runs[name] = (lr, seed, *simulated_scores(rng, 0.5, 0.05, 80, base))
        extras[name] = (
            key,
            Extras(exact_match=tuple(float(x) for x in rng.random(40) < 0.4), config=tuple(config.items())),
        )
    prefix = tmp_path_factory.mktemp("readers")
    run_stand_ins(prefix, runs, extras)
    return prefix


def _marin(prefix: Path, *args: str) -> str:
    env = {**os.environ, "MARIN_PREFIX": str(prefix)}
    done = subprocess.run(
        [MARIN, *args], capture_output=True, text=True, timeout=300, env=env, start_new_session=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_compare_shows_exact_match_lora_and_effective_config_in_md_csv_and_json(prefix):
    table = _marin(prefix, "compare", "evaluations/lora", "evaluations/full")
    rows: dict[str, list[str]] = {}
    for line in table.split("\n\n", 1)[0].splitlines():  # the first table: parameters and metrics
        cells = [c.strip() for c in line.split("|")[1:-1]]
        rows.setdefault(cells[0], cells)
    assert rows["model.lora"][1:] == ["{}", ""]  # LoRA at its defaults is a setting, not nothing
    assert rows["model.lora.rank"][1:] == ["8", ""]
    assert rows["model.model.rope_theta"][1:] == ["10000", "1000000"]  # each model's default, never blank
    assert rows["model.model.architecture"][1:] == ["llama", "qwen3"]
    assert rows["tinystories_qa/exact_match"][1].endswith("n=40")
    as_json = json.loads(
        _marin(prefix, "compare", "evaluations/lora", "evaluations/full", "--format", "json")
    )
    assert as_json["params"]["model.lora"] == [{}, None] and as_json["params"]["model.lora.rank"] == [8, None]
    assert as_json["params"]["model.model.rope_theta"] == [10000.0, 1000000.0]
    assert "tinystories_qa/exact_match" in as_json["metrics"]
    assert any(
        d["metric"] == "tinystories_qa/exact_match" and d["test"] == "mcnemar" for d in as_json["differences"]
    )
    rows = list(
        csv.DictReader(
            io.StringIO(_marin(prefix, "compare", "evaluations/lora", "evaluations/full", "--format", "csv"))
        )
    )
    assert {(r["name"], r["value"]) for r in rows if r["kind"] == "param"} >= {
        ("model.lora", "{}"),
        ("model.lora.rank", "8"),
    }
    assert any(r["kind"] == "metric" and r["name"] == "tinystories_qa/exact_match" for r in rows)


def test_marina_shows_configurations_exact_match_and_the_models_effective_config(prefix):
    from starlette.testclient import TestClient

    from marin.ui.app import UiConfig, create_app

    with TestClient(create_app(UiConfig(str(prefix)))) as client:
        page = client.get("/evals").text
        rel = next(p.relative_to(prefix) for p in (prefix / "evaluations").glob("lora-*"))
        one = client.get(f"/evals/{rel}").text
    assert "tinystories_qa/exact_match" in page
    configurations = page[page.index("<h2>Configurations</h2>") : page.index("<h2>Side by side</h2>")]
    assert "rep (2 seeds)" in page and "<td>rep</td>" in configurations and "2 x 80" in configurations
    assert "overlapping bars are not a significant difference" not in page  # false as a rule
    assert "bars that do not overlap do not make one configuration better" in page
    assert "<td>lora.rank</td><td>8</td>" in one and "<td>model.rope_theta</td><td>10000.0</td>" in one
    assert "Exact match: tinystories_qa" in one
