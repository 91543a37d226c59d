"""Lost is not failed: a step whose process was killed from outside (or whose runner died) is recorded
LOST and retried by the next run without any flag, up to `max_attempts` lost attempts of one key;
a step whose own code raised stays blocked until `--force-run-failed`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from marin.execution.plan import build_plan
from marin.execution.states import PlanState, StepState
from marin.execution.status import Event, StatusRecord, lost_attempts, read_status, write_status
from marin.execution.step_spec import StepSpec

pytestmark = pytest.mark.timeout(300)

EXPERIMENT = textwrap.dedent("""
    import os, time
    from pathlib import Path
    from marin.execution.step_spec import StepSpec

    def victim(path):
        marks = Path(path).parent / "marks"
        marks.mkdir(exist_ok=True)
        attempt = len(list(marks.iterdir())) + 1
        (marks / str(attempt)).write_text(str(os.getpid()))
        if attempt == 1:
            time.sleep(120)  # killed from outside meanwhile
        Path(path, "out.txt").write_text(f"attempt {attempt}")

    def broken(path):
        Path(path).parent.joinpath("broken-ran").open("a").write("x")
        raise ValueError("the step's own bug")

    victim_step = StepSpec(name="victim", fn=victim, output_path="victim")
    broken_step = StepSpec(name="broken", fn=broken, output_path="broken")
""")


def _marin_run(tmp_path, *extra: str) -> subprocess.Popen:
    (tmp_path / "exp.py").write_text(EXPERIMENT)
    return subprocess.Popen(
        [sys.executable, "-m", "marin.cli", "run", "exp.py", "--prefix", str(tmp_path / "out"), *extra],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "MARIN_PREFIX": ""},
    )


def _states(path) -> list[str]:
    return [e["state"] for e in json.loads((path / ".executor_status").read_text())["events"]]


def test_a_worker_killed_from_outside_is_retried_by_the_next_run_without_flags(tmp_path):
    first = _marin_run(tmp_path, "--step", "victim_step")
    mark = tmp_path / "out" / "marks" / "1"
    deadline = time.monotonic() + 120
    while not (mark.exists() and mark.read_text()):
        assert first.poll() is None and time.monotonic() < deadline, (
            first.stderr.read() if first.poll() else ""
        )
        time.sleep(0.05)
    os.kill(int(mark.read_text()), signal.SIGKILL)  # the step's worker process, from outside
    _, err = first.communicate(timeout=120)
    assert first.returncode == 1 and "LOST" in err and "the next run retries it (attempt 2 of 3)" in err
    out = tmp_path / "out" / "victim"
    assert _states(out) == ["RUNNING", "LOST"]

    second = _marin_run(tmp_path, "--step", "victim_step")  # no flag
    _, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert (out / "out.txt").read_text() == "attempt 2"
    assert _states(out) == ["RUNNING", "LOST", "RUNNING", "SUCCESS"]
    status = json.loads((out / ".executor_status").read_text())
    assert [e.get("attempt") for e in status["events"] if e["state"] == "RUNNING"] == [1, 2]


def test_a_step_whose_code_raised_stays_blocked_until_force_run_failed(tmp_path):
    first = _marin_run(tmp_path, "--step", "broken_step")
    _, err = first.communicate(timeout=120)
    assert first.returncode == 1 and "the step's own bug" in err
    out = tmp_path / "out" / "broken"
    assert _states(out) == ["RUNNING", "FAILED"]

    second = _marin_run(tmp_path, "--step", "broken_step")
    _, err = second.communicate(timeout=120)
    assert second.returncode == 1 and "--force-run-failed" in err
    assert (tmp_path / "out" / "broken-ran").read_text() == "x"  # not run again
    assert _states(out) == ["RUNNING", "FAILED"]

    third = _marin_run(tmp_path, "--step", "broken_step", "--force-run-failed")
    third.communicate(timeout=120)
    assert (tmp_path / "out" / "broken-ran").read_text() == "xx"  # retried when asked


def _status(*events: tuple[StepState, str | None]) -> list[Event]:
    return [Event(state, float(i), "h", 1, key=key) for i, (state, key) in enumerate(events)]


def test_lost_attempts_counts_losses_and_dead_runners_of_one_key_since_its_last_end():
    R, L, F, INT = StepState.RUNNING, StepState.LOST, StepState.FAILED, StepState.INTERRUPTED  # noqa: N806

    def count(*events):
        evs = _status(*events)
        return lost_attempts(StatusRecord(evs[-1].state, "s", "k", tuple(evs)), "k")

    assert count((R, "k"), (L, None)) == 1
    assert count((R, "k"), (R, "k"), (L, None)) == 2  # the first start's runner died
    assert count((R, "k"), (INT, None), (R, "k"), (L, None)) == 1  # an interrupt is never counted
    assert count((R, "k"), (L, None), (R, "k"), (F, None)) == 0  # a failure ends the count
    assert count((R, "old"), (L, None), (R, "k"), (L, None)) == 1  # another key's losses do not count
    assert count((R, "k")) == 0  # the last start may still be running: the caller decides


def test_the_plan_retries_a_lost_step_until_max_attempts_then_blocks_it(tmp_path):
    prefix = str(tmp_path)
    step = StepSpec(name="flaky", fn=lambda: None, version="1", output_path="flaky")
    key = build_plan([step], prefix).steps[0].key
    out = f"{prefix}/flaky"
    os.makedirs(out)
    lost = [
        Event(StepState.RUNNING, 1.0, "h", 1, key=key, attempt=1),
        Event(StepState.LOST, 2.0, "h", 1, error="killed"),
    ]
    write_status(out, "flaky", key, lost)
    planned = build_plan([step], prefix, max_attempts=3).steps[0]
    assert planned.state == PlanState.RUN_RETRY and "its process was lost (killed)" in planned.reason
    write_status(out, "flaky", key, lost * 3)
    assert read_status(out).state == StepState.LOST
    planned = build_plan([step], prefix, max_attempts=3).steps[0]
    assert planned.state == PlanState.BLOCKED and "lost in 3 attempts" in planned.reason
    assert (
        build_plan([step], prefix, force_run_failed=True, max_attempts=3).steps[0].state
        == PlanState.RUN_RETRY
    )
