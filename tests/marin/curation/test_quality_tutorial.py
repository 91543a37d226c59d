"""experiments/tutorials/quality_filter.py runs end to end at a reduced size, verbatim from the docs,
and prints the classifier's held-out AUC, the two cuts of one size and the comparison over seeds."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.marin.curation.test_curate_tutorial import REPO, docs_commands

pytest.importorskip("fasttext")

COMMAND = (
    "QUALITY_PAGES=300 QUALITY_SEEDS=2 QUALITY_TRAIN_STEPS=2 python -m experiments.tutorials.quality_filter"
)


def test_the_quality_tutorial_runs_verbatim_from_the_docs_and_compares_over_seeds(tmp_path):
    assert COMMAND in docs_commands()
    env = os.environ | {
        "MARIN_PREFIX": str(tmp_path / "prefix"),
        "HF_HUB_OFFLINE": "1",
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    done = subprocess.run(
        ["bash", "-c", COMMAND], cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    auc = re.search(r"classifier held-out AUC ([0-9.]+) \[([0-9.]+), ([0-9.]+)\] \(n=(\d+)\)", done.stdout)
    assert auc and float(auc[2]) <= float(auc[1]) <= float(auc[3]) and float(auc[1]) >= 0.8
    sizes = re.search(r"top 30% and random 30% keep (\d+) each", done.stdout)
    assert sizes and int(sizes[1]) > 0
    # marin compare's configuration-level comparison: each cut's seeds are its replicates
    assert "| top30 (2 seeds) | random30 (2 seeds) |" in done.stdout
    assert re.search(
        r"^\| bpb \| [0-9.]+ \[[0-9.]+, [0-9.]+\] sd [0-9.e-]+ n=2x\d+ \|", done.stdout, re.MULTILINE
    )
    assert re.search(
        r"^\| bpb \| top30 \| random30 \| [-0-9.e]+ \| \[[-0-9.e]+, [-0-9.e]+\] \| .* \| two-level t \(seeds, items\)",
        done.stdout,
        re.MULTILINE,
    )
