"""group_by over data several times the memory budget completes with bounded peak RSS (a real child process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

MIB = 1024 * 1024
BUDGET = 16 * MIB
# What the process may use beyond the budget: read buffers, one decoded batch, sort keys, the
# merge's open run files and the interpreter's own allocator slack.
FIXED_OVERHEAD = 48 * MIB


def test_group_by_over_five_times_the_budget_stays_under_budget_plus_fixed_overhead(tmp_path: Path):
    child = Path(__file__).with_name("memory_child.py")
    out = subprocess.run(
        [
            sys.executable,
            str(child),
            str(tmp_path),
            str(BUDGET),
            str(5 * BUDGET),
            "1",
        ],  # one shard: without spilling it would hold it all,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["input_bytes"] >= 4.5 * BUDGET
    assert report["grouped_records"] == report["records"]
    assert report["groups"] == 2001
    assert report["hot"] == (report["records"] + 2) // 3  # one group larger than the whole budget
    grown = report["peak_rss"] - report["rss_before"]
    assert grown < BUDGET + FIXED_OVERHEAD, f"peak RSS grew by {grown / MIB:.1f} MiB"
