"""Crash safety and concurrency with real processes: kill -9, two runners at once, stale leases."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

# A DAG script run as a separate process. Every execution of a step appends its name to COUNTER.
# A step named in HANG writes a partial file, signals STARTED, then sleeps HANG_S seconds before
# finishing; env vars are not part of any key, so a rerun without them is the same step.
DAG_SCRIPT = textwrap.dedent('''
    import os, sys, time
    from pathlib import Path
    from marin.execution.step_spec import StepSpec
    from marin.execution.step_runner import StepRunner

    def work(path):
        name = os.path.basename(path).rsplit("-", 1)[0]
        with open(os.environ["COUNTER"], "a") as f:
            f.write(f"{name} {os.getpid()}\\n")
        Path(path, "part-0.txt").write_text("first half")
        if name == os.environ.get("HANG"):
            Path(os.environ["STARTED"]).write_text(str(os.getpid()))
            time.sleep(float(os.environ.get("HANG_S", "600")))
        time.sleep(float(os.environ.get("STEP_S", "0")))
        Path(path, "part-1.txt").write_text("second half")
        return {"name": name}

    def build(layers, width):
        steps, previous = [], []
        for layer in range(layers):
            current = []
            for i in range(width):
                deps = [previous[i], previous[(i + 1) % width]] if previous else []
                current.append(StepSpec(name=f"s{layer}x{i}", fn=work, deps=deps, hash_attrs={"l": layer, "i": i}))
            steps += current
            previous = current
        return steps

    if __name__ == "__main__":
        layers, width = int(os.environ.get("LAYERS", "2")), int(os.environ.get("WIDTH", "2"))
        runner = StepRunner(prefix=sys.argv[1], max_concurrent=4, progress=False,
                            lease_timeout=float(os.environ.get("LEASE_TIMEOUT", "60")))
        runner.run(build(layers, width))
''')


@pytest.fixture
def dag(tmp_path):
    script = tmp_path / "dag.py"
    script.write_text(DAG_SCRIPT)
    prefix = tmp_path / "prefix"
    counter = tmp_path / "counter.txt"
    started = tmp_path / "started"

    def start(**env):
        full_env = {**os.environ, "COUNTER": str(counter), "STARTED": str(started),
                    **{k: str(v) for k, v in env.items()}}
        return subprocess.Popen([sys.executable, str(script), str(prefix)], env=full_env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def executions():
        return [line.split()[0] for line in counter.read_text().splitlines()] if counter.exists() else []

    def wait_started(proc, timeout=60):
        deadline = time.monotonic() + timeout
        while not started.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the hanging step never started"
            time.sleep(0.02)

    def output(name):
        (match,) = prefix.glob(f"{name}-*")
        return match

    return start, executions, wait_started, output


def _finish(proc, timeout=120):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return err


def _listing(path):
    """The files of an output, less the step's captured log (written by process-based clusters)."""
    return sorted(p.name for p in Path(path).iterdir() if p.name != ".executor_log")


def _status(path):
    status_file = Path(path, ".executor_status")
    return json.loads(status_file.read_text()) if status_file.exists() else None


def test_kill_9_mid_step_then_rerun_reruns_cleanly(dag):
    start, executions, wait_started, output = dag
    runner = start(HANG="s1x0")
    wait_started(runner)
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    hung = output("s1x0")
    assert _status(hung) is None  # never SUCCESS with partial output
    assert _listing(hung) == [".executor_lease.0", "part-0.txt"]
    done_before = {name for name in executions() if name != "s1x0"}

    _finish(start())  # same DAG, nothing hangs; the dead holder's lease is taken over at once
    status = _status(hung)
    assert status["state"] == "SUCCESS"
    assert _listing(hung) == [".artifact.json", ".executor_info", ".executor_status", "part-0.txt", "part-1.txt"]
    manifest = json.loads((hung / ".artifact.json").read_text())["files"]
    assert [f["path"] for f in manifest] == ["part-0.txt", "part-1.txt"]
    # Steps that had finished before the kill were not run again.
    ran = executions()
    assert all(ran.count(name) == 1 for name in done_before)
    assert ran.count("s1x0") == 2


def test_two_runners_at_once_execute_each_step_exactly_once(dag):
    start, executions, _, output = dag
    env = {"LAYERS": 4, "WIDTH": 6, "STEP_S": 0.05}
    first, second = start(**env), start(**env)
    _finish(first)
    _finish(second)
    ran = executions()
    expected = sorted(f"s{layer}x{i}" for layer in range(4) for i in range(6))
    assert sorted(ran) == expected  # 24 steps, each executed once across both runners
    assert all(_status(output(name))["state"] == "SUCCESS" for name in expected)


def test_silent_holder_loses_a_stale_lease_and_never_completes_twice(dag):
    start, executions, wait_started, output = dag
    holder = start(HANG="s0x0", HANG_S=4, LEASE_TIMEOUT=1, LAYERS=1, WIDTH=1)
    wait_started(holder)
    holder.send_signal(signal.SIGSTOP)  # alive but silent: no heartbeat
    try:
        taker = start(LEASE_TIMEOUT=1, LAYERS=1, WIDTH=1)
        _finish(taker)  # waited for the lease to go stale, took it over, ran the step
    finally:
        holder.send_signal(signal.SIGCONT)
    _finish(holder)  # its step finishes, finds the lease lost, and reuses the taker's output
    status = _status(output("s0x0"))
    successes = [e for e in status["events"] if e["state"] == "SUCCESS"]
    assert len(successes) == 1 and successes[0]["pid"] == taker.pid
    assert executions() == ["s0x0", "s0x0"]


def test_lease_of_a_dead_process_on_another_host_is_taken_over_after_the_timeout(dag):
    start, executions, wait_started, output = dag
    holder = start(HANG="s0x0", LAYERS=1, WIDTH=1)
    wait_started(holder)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    lease = output("s0x0") / ".executor_lease.0"
    record = json.loads(lease.read_text())
    last_heartbeat = time.time()
    lease.write_text(json.dumps({**record, "host": "another-host", "heartbeat": last_heartbeat}))
    _finish(start(LEASE_TIMEOUT=1.5, LAYERS=1, WIDTH=1))
    status = _status(output("s0x0"))
    assert status["state"] == "SUCCESS"
    # It cannot see a remote process die, so it only took over once the heartbeat was 1.5 s old.
    assert status["events"][0]["state"] == "RUNNING" and status["events"][0]["time"] >= last_heartbeat + 1.5
    assert not list(output("s0x0").glob(".executor_lease.*"))
