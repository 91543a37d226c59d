"""experiments/tutorials/quality_filter.py runs end to end verbatim from the docs: it curates, trains
the classifier, scores, makes both cuts, trains each arm with two seeds, evaluates and prints
`marin compare`'s configuration-level comparison (each cut's seeds are its replicates). The reduced
size runs in the default tier with the suite's small tokenizer (MARIN_TOKENIZER, docs/data.md: a
session fixture instead of the demo's BPE step); the full size, whose comparison separates the cuts,
in the slow tier."""

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
NUMBER = r"[-+]?[0-9.]+(?:e[-+]?[0-9]+)?"
DIFFERENCE = re.compile(
    rf"^\| bpb \| top30 \| random30 \| ({NUMBER}) \| \[({NUMBER}), ({NUMBER})\] \| [^|]+ \| [^|]+ \| "
    r"two-level t \(seeds, items\)[^|]* \| *(\w*) *\|$",
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
    """The AUC with its interval, two cuts of one size, each cut's mean over its seeds, and the
    difference row; returns the difference row's match (a - b, interval low, high, better)."""
    auc = re.search(r"classifier held-out AUC ([0-9.]+) \[([0-9.]+), ([0-9.]+)\] \(n=(\d+)\)", stdout)
    assert auc and float(auc[2]) <= float(auc[1]) <= float(auc[3]) and float(auc[1]) >= 0.8, stdout
    sizes = re.search(r"curated pages (\d+); top 30% and random 30% keep (\d+) each", stdout)
    assert sizes and int(sizes[2]) == round(0.3 * int(sizes[1])), stdout
    assert f"| top30 ({seeds} seeds) | random30 ({seeds} seeds) |" in stdout, stdout
    cell = rf"{NUMBER} \[{NUMBER}, {NUMBER}\] sd {NUMBER} n={seeds}x\d+"
    assert re.search(rf"^\| bpb \| {cell} \| {cell} \|$", stdout, re.MULTILINE), stdout
    difference = DIFFERENCE.search(stdout)
    assert difference, stdout
    assert float(difference[2]) <= float(difference[1]) <= float(difference[3]), difference[0]
    return difference


def test_the_quality_tutorial_runs_verbatim_from_the_docs_and_compares_over_seeds(
    tmp_path, chat_tokenizer_dir
):
    stdout = run_tutorial(REDUCED, tmp_path / "prefix", MARIN_TOKENIZER=chat_tokenizer_dir)
    check_printout(stdout, seeds=2)


@pytest.mark.slow
@pytest.mark.timeout(1800)  # about 6 minutes on 2 cores shared with other work
def test_at_full_size_the_top_cut_beats_the_random_cut_by_more_than_seed_noise(tmp_path):
    difference = check_printout(run_tutorial(FULL, tmp_path / "prefix"), seeds=3)
    assert difference[4] == "top30" and float(difference[3]) < 0, difference[0]
