"""A runner SIGKILLed mid-step takes its step's process with it: on the default LocalCluster the worker
is gone within a second and writes nothing once its runner is gone (another runner may already be
taking the step over)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

pytestmark = pytest.mark.timeout(300)

TICKER = textwrap.dedent("""
    import os, time
    from pathlib import Path
    from marin.execution.step_spec import StepSpec

    def tick(path):
        Path(path, "pid").write_text(str(os.getpid()))
        with open(Path(path, "ticks"), "a") as ticks:
            while True:  # a step that writes into its output until it is stopped
                ticks.write(f"{time.time()!r}\\n")
                ticks.flush()
                time.sleep(0.002)

    ticker = StepSpec(name="ticker", fn=tick, output_path="ticker")
""")


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_sigkilled_runners_worker_is_gone_within_a_second_and_writes_nothing_after(tmp_path):
    (tmp_path / "exp.py").write_text(TICKER)
    env = {name: value for name, value in os.environ.items() if name != "MARIN_CLUSTER"}
    runner = subprocess.Popen(
        [sys.executable, "-m", "marin.cli", "run", "exp.py", "--prefix", "out"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    out = tmp_path / "out" / "ticker"
    deadline = time.monotonic() + 120
    while not ((out / "ticks").exists() and (out / "ticks").stat().st_size > 1000):
        assert runner.poll() is None and time.monotonic() < deadline, "the step never started"
        time.sleep(0.02)
    worker = int((out / "pid").read_text())
    assert worker != runner.pid and not _gone(worker)
    runner.kill()  # SIGKILL: nothing of the runner's own runs after this
    runner.wait()
    dead = time.time()  # the runner is reaped: surely gone
    while not _gone(worker):
        assert time.time() - dead < 1.0, "the worker outlived its SIGKILLed runner by a second"
        time.sleep(0.005)
    last_tick = float((out / "ticks").read_text().splitlines()[-1])
    assert last_tick <= dead, f"the worker wrote {last_tick - dead:.3f} s after its runner was gone"
    time.sleep(0.2)
    assert float((out / "ticks").read_text().splitlines()[-1]) == last_tick
    left = [p.pid for p in psutil.process_iter() if _group(p) == runner.pid and not _gone(p.pid)]
    assert not left, f"processes of the run outlived its runner: {left}"  # idle warm workers neither


def _group(process: psutil.Process) -> int | None:
    try:
        return os.getpgid(process.pid)
    except ProcessLookupError:
        return None
