"""The soak's short version (benchmarks/soak.py --short, its SHORT size): 47 mixed steps (40 trivial,
zephyr, a tokenizer and a tokenization, two nano trainings) driven by three runner processes while a
seeded chaos thread SIGKILLs runners and workers, sends SIGTERM and skews a lease holder's clock, a
fault every 0.5-1.5 s until each kind was injected; on local disk and on moto's S3. Every invariant
the full soak (307 steps) checks must hold."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

# Chaos kills processes on a clock: the soaks run on one pytest-xdist worker, one after another.
pytestmark = [pytest.mark.timeout(400), pytest.mark.xdist_group("timing")]


# Both stores run the same DAG against the same invariants: the default tier runs it on S3 (leases as
# conditional creates on a bucket, the harder case), the slow tier on local disk too.
@pytest.mark.parametrize("store", [pytest.param("local", marks=pytest.mark.slow), "s3"])
def test_the_short_soak_keeps_every_invariant_under_chaos(store):
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "soak.py"), "--short", "--store", store],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=380,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["steps"] == 47 and result["all_success"]
    assert all(n > 0 for n in result["faults_by_kind"].values()), result["faults_by_kind"]
    assert result["verified"] == f"{result['steps']}/{result['steps']}", result["unverified"]
    assert result["partial_outputs"] == [] and result["stray_files"] == []
    assert result["repeated_unexplained"] == []
    assert result["invariants_hold"], result
