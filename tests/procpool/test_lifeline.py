"""A worker dies the moment the process that started it does, whichever thread started it, and lives
as long as that process does even when the starting thread has ended (`procpool.lifeline`)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

pytestmark = pytest.mark.timeout(120)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PARENT = textwrap.dedent("""
    import os, sys, threading, time
    from procpool.process import WorkerProcess

    workers = {}

    def start(start_method):
        workers[start_method] = WorkerProcess("tests.procpool.handlers:echo_pid", start=start_method)

    for method in ("exec", "fork"):
        thread = threading.Thread(target=start, args=(method,))  # a thread that ends at once
        thread.start()
        thread.join()
    time.sleep(0.5)  # a worker tied to its starting thread would be dead by now
    print(" ".join(workers[m].call(b"ping").decode().split()[1] for m in ("exec", "fork")), flush=True)
    time.sleep(300)
""")


def test_workers_outlive_the_thread_that_started_them_and_die_with_their_process():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, *sys.path])}
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT
    )
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2, "the workers did not answer after their starting threads ended"
        workers = [psutil.Process(pid) for pid in pids]
    finally:
        parent.kill()
        parent.wait()
    killed = time.monotonic()
    while not all(_dead(w) for w in workers):
        assert time.monotonic() - killed < 1.0, "a worker outlived its parent by a second"
        time.sleep(0.005)


def _dead(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE  # dead; reaped by whoever adopted it
    except psutil.NoSuchProcess:
        return True
