"""The soak's small versions: mixed steps (trivial ones, zephyr, a tokenizer and a tokenization, two
nano trainings) driven by three runner processes while a seeded chaos thread SIGKILLs runners and
workers, sends SIGTERM and skews a lease holder's clock, a fault every 0.5-1.5 s until each kind was
injected. Every invariant the full soak (307 steps) checks must hold. The default tier runs the
tiny one (benchmarks/soak.py --tiny: 15 steps) on moto's S3; the slow tier the short one (--short:
47 steps) on local disk and on S3."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

# Chaos kills processes on a clock: the soaks run on one pytest-xdist worker, one after another.
pytestmark = [pytest.mark.timeout(400), pytest.mark.xdist_group("timing"), pytest.mark.call_limit(150)]


# The same DAG and invariants at two sizes and on two stores. The default tier: the tiny size on S3
# (leases as conditional creates on a bucket, the harder case); the slow tier: the short size on both.
@pytest.mark.parametrize(
    "size, steps, store",
    [
        pytest.param("--tiny", 15, "s3", id="tiny-s3"),
        pytest.param("--short", 47, "local", marks=pytest.mark.slow, id="short-local"),
        pytest.param("--short", 47, "s3", marks=pytest.mark.slow, id="short-s3"),
    ],
)
def test_the_soak_keeps_every_invariant_under_chaos(size, steps, store):
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "soak.py"), size, "--store", store],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=380,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["steps"] == steps and result["all_success"]
    assert all(n > 0 for n in result["faults_by_kind"].values()), result["faults_by_kind"]
    assert result["verified"] == f"{result['steps']}/{result['steps']}", result["unverified"]
    assert result["partial_outputs"] == [] and result["stray_files"] == []
    assert result["repeated_unexplained"] == []
    assert result["invariants_hold"], result
