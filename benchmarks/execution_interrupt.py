"""How fast a Ctrl-C stops a running step: signal to the step's process gone, on the default cluster.

A fresh `marin run` of one step that sleeps 60 s in its LocalCluster worker gets SIGINT (or SIGTERM)
once the step has started; the figure is the time from the signal until the step's own process is
gone (the runner cancels it through the cluster, then records it INTERRUPTED). The same-run baseline
is the floor of that path: SIGKILL sent straight to a sleeping child process until it is gone.

Prints one JSON object: the median and worst over `--repeats` per signal (goal: within 2 s), the
baseline, their ratio, the load average and whether the goal is met.
Usage: `python benchmarks/execution_interrupt.py [--repeats 3]`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

from fresh import load_average

GOAL_S = 2.0
EXPERIMENT = textwrap.dedent("""
    import os, time
    from pathlib import Path
    from marin.execution.step_spec import StepSpec

    def sleep(path):
        Path(path, "pid").write_text(str(os.getpid()))
        time.sleep(60)

    sleeper = StepSpec(name="sleeper", fn=sleep, output_path="sleeper")
""")


def _gone(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _until_gone(pid: int, since: float) -> float:
    while not _gone(pid):
        if time.monotonic() - since > 60:
            raise RuntimeError(f"process {pid} outlived the signal by 60 s")
        time.sleep(0.002)
    return time.monotonic() - since


def stop_step(root: str, sig: signal.Signals) -> float:
    """Seconds from `sig` to a fresh runner until its running step's process is gone."""
    prefix = tempfile.mkdtemp(dir=root)
    pid_file = os.path.join(prefix, "sleeper", "pid")
    runner = subprocess.Popen(
        [sys.executable, "-m", "marin.cli", "run", "exp.py", "--prefix", prefix],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "MARIN_PREFIX": ""},
    )
    try:
        deadline = time.monotonic() + 120
        while not (os.path.exists(pid_file) and open(pid_file).read()):
            if runner.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the step never started")
            time.sleep(0.01)
        step_pid = int(open(pid_file).read())
        signalled = time.monotonic()
        runner.send_signal(sig)
        took = _until_gone(step_pid, signalled)
        runner.wait(timeout=60)
        return took
    finally:
        if runner.poll() is None:
            runner.kill()
        shutil.rmtree(prefix, ignore_errors=True)


def kill_child() -> float:
    """Seconds from SIGKILL to a sleeping child process until it is gone: the floor of any stop."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    time.sleep(0.2)
    signalled = time.monotonic()
    child.send_signal(signal.SIGKILL)
    took = _until_gone(child.pid, signalled)
    child.wait()
    return took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="marin-interrupt-")
    try:
        with open(os.path.join(root, "exp.py"), "w") as f:
            f.write(EXPERIMENT)
        runs: dict[str, list[float]] = {"SIGINT": [], "SIGTERM": []}
        for _ in range(args.repeats):
            for name in runs:
                runs[name].append(stop_step(root, signal.Signals[name]))
        baseline = statistics.median(kill_child() for _ in range(args.repeats))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    worst = max(max(v) for v in runs.values())
    print(
        json.dumps(
            {
                "benchmark": "execution_interrupt",
                "cluster": "default (LocalCluster)",
                "repeats": args.repeats,
                **{
                    f"{name.lower()}_to_step_gone_median_s": round(statistics.median(v), 3)
                    for name, v in runs.items()
                },
                "worst_s": round(worst, 3),
                "sigkill_child_baseline_s": round(baseline, 4),
                "ratio_worst_vs_baseline": round(worst / baseline, 1) if baseline else None,
                "load_average": load_average(),
                "goal_s": GOAL_S,
                "meets_goal": worst <= GOAL_S,
            }
        )
    )


if __name__ == "__main__":
    main()
