"""RayCluster(echo=True) shows a running Ray task's output lines on the driver's terminal as they come."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(300)

DRIVER = textwrap.dedent("""
    import os, sys, time
    from fray.cluster.ray_cluster import RayCluster

    flag, log = sys.argv[1], sys.argv[2]

    def task():
        from tqdm import tqdm
        print("first line from the task", flush=True)
        deadline = time.monotonic() + 120
        while not os.path.exists(flag) and time.monotonic() < deadline:
            time.sleep(0.1)
        for _ in tqdm(range(3), desc="progress", mininterval=0):
            pass
        print("saw the flag" if os.path.exists(flag) else "gave up waiting", flush=True)
        return 7

    cluster = RayCluster(echo=True)
    print("result", cluster.submit(task, name="echoed", log_path=log).result(), flush=True)
    sys.stdin.read()  # Ray forwards a worker's lines asynchronously: live until the test has seen them
    cluster.shutdown()
""")


def test_a_running_ray_tasks_lines_reach_the_driver_while_it_runs(ray_nodes, tmp_path):
    flag, log = tmp_path / "flag", tmp_path / "task.log"
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(flag), str(log)],
        env={**os.environ, "RAY_ADDRESS": ray_nodes.address},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seen = []
    try:
        for line in driver.stdout:
            seen.append(line)
            if "first line from the task" in line:
                flag.touch()  # the task waits for this: only a line shown while it runs can release it
            text = "".join(seen)
            if (
                "saw the flag" in text
                and "progress: 100%" in text
                and "result 7" in text
                or "gave up" in text
            ):
                break
        driver.stdin.close()
        driver.wait(timeout=60)
    finally:
        driver.kill()
    out = "".join(seen)
    assert driver.returncode == 0, out
    assert "result 7" in out
    echoed = [line for line in seen if "(echoed pid=" in line]
    assert any("saw the flag" in line for line in echoed), out
    assert any("progress: 100%" in line for line in echoed), out  # the tqdm bar's final state
    # The log keeps everything, the echo is a copy.
    assert "first line from the task" in log.read_text() and "saw the flag" in log.read_text()
