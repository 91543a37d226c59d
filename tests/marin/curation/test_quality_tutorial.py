"""experiments/tutorials/quality_filter.py runs end to end verbatim from the docs: it curates, trains
the classifier, scores, makes both cuts, trains each arm with two seeds, evaluates and prints the
comparison over seeds. The reduced size runs in the default tier with the suite's small tokenizer
(MARIN_TOKENIZER, docs/data.md: a session fixture instead of the demo's BPE step); the full size,
whose comparison separates the cuts, in the slow tier."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.marin.curation.test_curate_tutorial import REPO, docs_commands
from tests.shell_env import fresh_env

pytest.importorskip("fasttext")

REDUCED = (
    "QUALITY_PAGES=300 QUALITY_SEEDS=2 QUALITY_TRAIN_STEPS=2 python -m experiments.tutorials.quality_filter"
)
FULL = "python -m experiments.tutorials.quality_filter"
COMPARISON = re.compile(
    r"^top30 - random30: ([-+][0-9.]+) \[([-+][0-9.]+), ([-+][0-9.]+)\] \(Welch t over seeds, p=[0-9.e-]+\): "
    r"(top30 better|random30 better|not separable) \(lower bpb is better\)$",
    re.MULTILINE,
)


def run_tutorial(command: str, prefix, **env: str) -> str:
    assert command in docs_commands()
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=REPO,
        env=fresh_env(MARIN_PREFIX=str(prefix), HF_HUB_OFFLINE="1", **env),
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
        start_new_session=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def check_printout(stdout: str, seeds: int) -> re.Match:
    auc = re.search(r"classifier held-out AUC ([0-9.]+) \[([0-9.]+), ([0-9.]+)\] \(n=(\d+)\)", stdout)
    assert auc and float(auc[2]) <= float(auc[1]) <= float(auc[3]) and float(auc[1]) >= 0.8, stdout
    sizes = re.search(r"curated pages (\d+); top 30% and random 30% keep (\d+) each", stdout)
    assert sizes and int(sizes[2]) == round(0.3 * int(sizes[1])), stdout
    for arm in ("top30", "random30"):
        line = rf"^{arm} +bpb mean [0-9.]+ +seed sd [0-9.]+ +over {seeds} seeds$"
        assert re.search(line, stdout, re.MULTILINE), stdout
    comparison = COMPARISON.search(stdout)
    assert comparison and float(comparison[2]) <= float(comparison[1]) <= float(comparison[3]), stdout
    return comparison


def test_the_quality_tutorial_runs_verbatim_from_the_docs_and_compares_over_seeds(
    tmp_path, chat_tokenizer_dir
):
    stdout = run_tutorial(REDUCED, tmp_path / "prefix", MARIN_TOKENIZER=chat_tokenizer_dir)
    check_printout(stdout, seeds=2)


@pytest.mark.slow
def test_at_full_size_the_top_cut_beats_the_random_cut_by_more_than_seed_noise(tmp_path):
    comparison = check_printout(run_tutorial(FULL, tmp_path / "prefix"), seeds=3)
    assert comparison[4] == "top30 better" and float(comparison[3]) < 0, comparison[0]
