"""benchmarks/scaling_fit.py runs at a reduced size and prints its figures beside their baselines (no
timing is asserted: the figures are the lead's to measure on a quiet machine)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_the_scaling_benchmark_prints_the_bootstrap_fit_beside_the_plain_fit_and_scipys_refits():
    done = subprocess.run(
        [
            sys.executable,
            "benchmarks/scaling_fit.py",
            "--points",
            "60",
            "--resamples",
            "30",
            "--scipy-resamples",
            "5",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["benchmark"] == "scaling_fit" and result["meets_goal"] is None  # not the goal's size
    for size in (result["at_goal_size"], result["at_20_runs"]):
        assert size["bootstrap_fit_s"] > 0 and size["plain_fit_s"] > 0 and size["scipy_cpu_ms_per_refit"] > 0
        assert size["median_relative_difference_from_scipy_optima"] < 1e-5  # the same optima as scipy's
        lo, hi = size["alpha_interval"]
        assert lo < size["fit"]["alpha"] < hi
    assert result["at_goal_size"]["points"] == 60 and len(result["load_average"]) == 3
