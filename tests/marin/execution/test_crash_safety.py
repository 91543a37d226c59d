"""Crash safety and concurrency with real processes: kill -9, two runners at once, stale leases."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from marin.execution.explain import list_outputs

# A DAG script run as a separate process. Every execution of a step appends its name to COUNTER.
# A step named in HANG writes a partial file, signals STARTED, then sleeps HANG_S seconds before
# finishing; env vars are not part of any key, so a rerun without them is the same step.
DAG_SCRIPT = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    from marin.execution.step_spec import StepSpec
    from marin.execution.step_runner import StepRunner

    def work(path):
        name = os.path.basename(path).rsplit("-", 1)[0]
        with open(os.environ["COUNTER"], "a") as f:
            f.write(f"{name} {os.getpid()}\\n")
        Path(path, "part-0.txt").write_text("first half")
        if name == os.environ.get("FAIL"):
            raise RuntimeError(f"{name} fails on purpose")
        if name == os.environ.get("HANG"):
            Path(os.environ["STARTED"]).write_text(str(os.getpid()))
            time.sleep(float(os.environ.get("HANG_S", "600")))
        time.sleep(float(os.environ.get("STEP_S", "0")))
        Path(path, "part-1.txt").write_text(f"second half by {os.getpid()}")
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
        if os.environ.get("PLAN"):
            print(json.dumps(runner.plan(build(layers, width)).to_json()))
        else:
            runner.run(build(layers, width), force_run_failed=bool(os.environ.get("FORCE_RUN_FAILED")))
""")


@pytest.fixture
def dag(tmp_path):
    script = tmp_path / "dag.py"
    script.write_text(DAG_SCRIPT)
    prefix = tmp_path / "prefix"
    counter = tmp_path / "counter.txt"
    started = tmp_path / "started"

    def start(new_session=False, **env):
        full_env = {
            **os.environ,
            "COUNTER": str(counter),
            "STARTED": str(started),
            **{k: str(v) for k, v in env.items()},
        }
        return subprocess.Popen(
            [sys.executable, str(script), str(prefix)],
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=new_session,
        )

    def executions(pids=False):
        """The steps executed so far, in order (with the pid of the process that ran each, if `pids`)."""
        lines = counter.read_text().splitlines() if counter.exists() else []
        return [(line.split()[0], int(line.split()[1])) if pids else line.split()[0] for line in lines]

    def wait_started(proc, timeout=60):
        """The pid of the process running the hanging step, once it has started."""
        deadline = time.monotonic() + timeout
        while not (started.exists() and started.read_text()):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the hanging step never started"
            time.sleep(0.02)
        return int(started.read_text())

    def output(name):
        (match,) = prefix.glob(f"{name}-*")
        return match

    def plan(**env):
        done = start(PLAN=1, **env)
        out = _finish(done, stdout=True)
        return {s["name"]: s for s in json.loads(out)["steps"]}

    start.plan = plan
    return start, executions, wait_started, output


def _finish(proc, timeout=120, stdout=False):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return out if stdout else err


def _kill(proc):
    proc.send_signal(signal.SIGKILL)
    proc.wait()


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
    _kill(runner)
    hung = output("s1x0")
    killed = _status(hung)
    assert killed["state"] == "RUNNING" and killed["events"][-1]["pid"] == runner.pid  # never SUCCESS
    assert _listing(hung) == [".executor_lease.0", ".executor_status", "part-0.txt"]
    # Finished before the kill: started *and* recorded SUCCESS (a step beside s1x0 may have started
    # and been killed before its SUCCESS, and is then rightly run again).
    done_before = {
        name
        for name in executions()
        if name != "s1x0" and (_status(output(name)) or {}).get("state") == "SUCCESS"
    }
    assert done_before  # s1x0's dependencies at least
    planned = start.plan()
    assert planned["s1x0"]["state"] == "run: retry" and "interrupted" in planned["s1x0"]["reason"]
    assert all(planned[name]["state"] == "cached" for name in done_before)
    (row,) = [r for r in list_outputs(str(hung.parent)) if r.path == str(hung)]
    assert row.state == "INTERRUPTED" and "died" in row.detail  # `marin status` shows the dead attempt
    (hung / "leftover.txt").write_text(
        "what the killed attempt wrote"
    )  # a step that is not resumable: cleared

    _finish(start())  # same DAG, nothing hangs; the dead holder's lease is taken over at once
    status = _status(hung)
    assert status["state"] == "SUCCESS"
    assert [e["state"] for e in status["events"]] == ["RUNNING", "RUNNING", "SUCCESS"]
    assert _listing(hung) == [
        ".artifact.json",
        ".executor_info",
        ".executor_status",
        "part-0.txt",
        "part-1.txt",
    ]
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
    killed, retried, _ = status["events"]
    assert killed["pid"] == holder.pid and retried["state"] == "RUNNING"
    assert retried["time"] >= last_heartbeat + 1.5
    assert not list(output("s0x0").glob(".executor_lease.*"))


def test_a_killed_retry_of_a_failed_step_is_retried_again_not_blocked(dag):
    start, executions, wait_started, output = dag
    failed = start(FAIL="s0x0", LAYERS=1, WIDTH=1)
    out, err = failed.communicate(timeout=120)
    assert failed.returncode != 0 and _status(output("s0x0"))["state"] == "FAILED"
    assert start.plan(LAYERS=1, WIDTH=1)["s0x0"]["state"] == "blocked"

    retry = start(FORCE_RUN_FAILED=1, HANG="s0x0", LAYERS=1, WIDTH=1)
    wait_started(retry)
    _kill(retry)
    planned = start.plan(LAYERS=1, WIDTH=1)["s0x0"]
    assert planned["state"] == "run: retry" and "interrupted" in planned["reason"]

    _finish(start(LAYERS=1, WIDTH=1))  # no force_run_failed needed: the last attempt was not a failure
    status = _status(output("s0x0"))
    assert [e["state"] for e in status["events"]] == ["RUNNING", "FAILED", "RUNNING", "RUNNING", "SUCCESS"]
    assert executions() == ["s0x0"] * 3


def test_a_stalled_runner_that_lost_its_lease_kills_its_step_as_soon_as_it_wakes(dag):
    start, executions, wait_started, output = dag
    holder = start(new_session=True, HANG="s0x0", LEASE_TIMEOUT=1, LAYERS=1, WIDTH=1)  # the step hangs 600 s
    step_pid = wait_started(holder)
    os.killpg(holder.pid, signal.SIGSTOP)  # the runner and its step's process stall (a frozen machine)
    try:
        taker = start(LEASE_TIMEOUT=1, LAYERS=1, WIDTH=1)
        _finish(taker)  # took the stale lease over and ran the step
        os.killpg(holder.pid, signal.SIGCONT)
        _finish(holder)  # notices the loss, kills its step, then reuses the taker's output
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(holder.pid, signal.SIGKILL)
    assert not psutil.pid_exists(step_pid)  # the first attempt's process is gone...
    out = output("s0x0")
    (_, first_pid), (_, taker_step_pid) = executions(pids=True)
    assert first_pid == step_pid
    assert (out / "part-1.txt").read_text() == f"second half by {taker_step_pid}"  # ...and never finished
    status = _status(out)
    assert [(e["state"], e["pid"]) for e in status["events"]] == [
        ("RUNNING", holder.pid),
        ("RUNNING", taker.pid),
        ("SUCCESS", taker.pid),
    ]  # the holder recorded nothing
    assert executions() == ["s0x0", "s0x0"]
