"""experiments/tutorials/post_train.py, reduced, runs verbatim from the docs. The default tier runs it
at its smoke size (POST_TRAIN_SMOKE: two steps a stage on a hundredth of the data), end to end; the slow tier at
the documented reduced size, where SFT raises held-out exact match."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
QUICK_COMMAND = "POST_TRAIN_QUICK=1 python -m experiments.tutorials.post_train"


@pytest.mark.parametrize(
    "smoke",
    [
        pytest.param(True, id="smoke"),
        pytest.param(False, marks=[pytest.mark.slow, pytest.mark.timeout(1800)], id="reduced"),
    ],
)
def test_the_tutorial_runs_from_the_docs_end_to_end_and_at_its_reduced_size_sft_beats_the_base_model(
    tmp_path, smoke
):
    docs = (REPO / "docs" / "post_training.md").read_text()
    assert QUICK_COMMAND in docs
    env = os.environ | {
        "MARIN_PREFIX": str(tmp_path / "prefix"),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    if smoke:
        env["POST_TRAIN_SMOKE"] = "1"
    done = subprocess.run(
        ["bash", "-c", QUICK_COMMAND], cwd=REPO, env=env, capture_output=True, text=True, timeout=1500
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = {
        stage: (float(value), float(lo), float(hi))
        for stage, value, lo, hi in re.findall(
            r"^\s+(base|sft|dpo)\s+([\d.]+)\s+\[([\d.]+), ([\d.]+)\]", done.stdout, re.MULTILINE
        )
    }
    assert set(figures) == {"base", "sft", "dpo"}, done.stdout[-2000:]
    for value, lo, hi in figures.values():
        assert lo <= value <= hi
    if not smoke:  # two steps teach nothing
        assert figures["sft"][0] > figures["base"][0]  # the direction; the full run's intervals separate
    assert "sft - base:" in done.stdout and "McNemar p =" in done.stdout
    names = {p.name.rsplit("-", 1)[0] for p in (tmp_path / "prefix" / "evaluations").iterdir()}
    assert names == {"qa-base", "qa-sft", "qa-dpo"}
