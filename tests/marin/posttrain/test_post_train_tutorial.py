"""experiments/tutorials/post_train.py, reduced, runs verbatim from the docs: SFT raises held-out exact match."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
QUICK_COMMAND = "POST_TRAIN_QUICK=1 python -m experiments.tutorials.post_train"


def test_the_reduced_tutorial_runs_from_the_docs_and_sft_beats_the_base_model(tmp_path):
    docs = (REPO / "docs" / "post_training.md").read_text()
    assert QUICK_COMMAND in docs
    env = os.environ | {
        "MARIN_PREFIX": str(tmp_path / "prefix"),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
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
    assert figures["sft"][0] > figures["base"][0]  # the direction; the full run's intervals separate
    assert "sft - base:" in done.stdout and "McNemar p =" in done.stdout
    names = {p.name.rsplit("-", 1)[0] for p in (tmp_path / "prefix" / "evaluations").iterdir()}
    assert names == {"qa-base", "qa-sft", "qa-dpo"}
