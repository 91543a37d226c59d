"""The test Ray cluster (tests/ray_nodes.py) used as a benchmark or script uses it: inside `try/finally`."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ray_nodes import STARTS, LocalRayCluster, NodeStartTimedOut

HERE = Path(__file__).resolve().parent

DRIVER = textwrap.dedent("""
    import os, sys
    # The installed packages first: tests/ holds folders named like them (tests/rayconnect, ...),
    # which on sys.path would be imported as empty namespace packages instead.
    from fray.cluster import RayCluster
    import rayconnect, storage
    sys.path.insert(0, sys.argv[1])
    from ray_nodes import LocalRayCluster

    nodes = LocalRayCluster(workers=0, cpus_per_node=1).start()
    os.environ["RAY_ADDRESS"] = nodes.address
    try:
        RayCluster(max_retries=0)
        raise ValueError("the workload failed")
    finally:
        nodes.stop()
""")


def test_a_driver_failing_inside_the_cluster_prints_its_own_traceback(tmp_path):
    # Ray's excepthook would first report the error to the stopped cluster's GCS, wait 60 s for it and
    # abort, hiding the real error behind "Failed to connect to GCS".
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(HERE)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert done.returncode == 1, done.stderr[-3000:]
    assert "ValueError: the workload failed" in done.stderr, done.stderr[-3000:]
    assert "Failed to connect to GCS" not in done.stderr


def test_a_cluster_whose_node_times_out_starting_is_started_once_more_then_fails_saying_why(monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "token")  # start() sets it; put back whatever it was after
    tries = []

    def timing_out(self, workers):
        tries.append(workers)
        raise NodeStartTimedOut("ray start --head failed: The current node timed out during startup")

    monkeypatch.setattr(LocalRayCluster, "_start_nodes", timing_out)
    with pytest.raises(NodeStartTimedOut, match=r"did not start in 2 tries, at load average [\d.]+ [\d.]+"):
        LocalRayCluster(workers=1).start()
    assert STARTS == 2 and tries == [1, 1]
