"""benchmarks/compare_replicates.py runs at a reduced size and prints its figures beside their baseline (no
timing is asserted: the figures are the lead's to measure on a quiet machine)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_the_compare_benchmark_prints_compare_beside_the_paired_bootstrap():
    done = subprocess.run(
        [
            sys.executable,
            "benchmarks/compare_replicates.py",
            "--items",
            "100",
            "--rounds",
            "1",
            "--no-all-pairs",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["compare_s"] > 0 and figures["paired_s"] > 0 and figures["compare_over_paired"] > 0
    assert set(figures["goals"]) == {"compare_s <= 2", "compare_over_paired <= 3"}
    assert figures["meets_goals"] == all(figures["goals"].values())  # run_all.py's verdict
    assert "100 items" in figures["workload"] and len(figures["load_average"]) == 3
