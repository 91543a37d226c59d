"""Leases under damage: half-written lease files, racing creators, and heartbeats whose storage fails."""

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import orjson
import pytest

import storage
from fray.cluster import ThreadCluster
from marin.execution import lease as lease_module
from marin.execution.errors import LeaseGivenUpError, StepFailedError
from marin.execution.heartbeat import Heartbeat
from marin.execution.lease import try_acquire
from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec

RUN_ONE_STEP = textwrap.dedent("""
    import sys
    from pathlib import Path
    from fray.cluster import ThreadCluster
    from marin.execution.step_runner import StepRunner
    from marin.execution.step_spec import StepSpec

    def work(path):
        Path(path, "done.txt").write_text("done")

    step = StepSpec(name="fixed", fn=work, output_path="fixed")
    StepRunner(prefix=sys.argv[1], cluster=ThreadCluster(), progress=False, lease_timeout=1).run([step])
""")


def test_an_empty_lease_file_goes_stale_after_the_timeout(tmp_path):
    # What an O_EXCL create followed by a write leaves when its writer is killed in between.
    out = tmp_path / "prefix" / "fixed"
    out.mkdir(parents=True)
    lease = out / ".executor_lease.0"
    lease.write_bytes(b"")
    written = lease.stat().st_mtime
    done = subprocess.run(
        [sys.executable, "-c", RUN_ONE_STEP, str(tmp_path / "prefix")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    record = json.loads((out / ".executor_status").read_text())
    assert record["state"] == "SUCCESS"
    running = [e for e in record["events"] if e["state"] == "RUNNING"]
    assert running[-1]["time"] >= written + 1  # taken over only once the file's mtime was a timeout old
    assert (out / "done.txt").read_text() == "done"
    assert not list(out.glob(".executor_lease.*"))


def test_an_unreadable_lease_is_honoured_until_it_is_stale(tmp_path):
    (tmp_path / ".executor_lease.0").write_bytes(b'{"token": "ab')  # cut off mid-write
    holder = try_acquire(str(tmp_path), "s", timeout=60)
    assert not isinstance(holder, lease_module.Lease) and holder.host == "?"
    os.utime(tmp_path / ".executor_lease.0", (time.time() - 120, time.time() - 120))
    lease = try_acquire(str(tmp_path), "s", timeout=60)
    assert isinstance(lease, lease_module.Lease) and lease.generation == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [".executor_lease.1"]


def test_exclusive_create_publishes_whole_files_and_exactly_one_racer_wins(tmp_path):
    target = str(tmp_path / ".executor_lease.0")
    barrier = threading.Barrier(8)
    wins = []

    def race(i):
        barrier.wait()
        if storage.create_exclusive(target, orjson.dumps({"racer": i, "pad": "x" * 100_000})):
            wins.append(i)

    threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1
    assert orjson.loads(Path(target).read_bytes())["racer"] == wins[0]
    assert os.listdir(tmp_path) == [".executor_lease.0"]  # no temporary file left behind


def _failing_writes(monkeypatch, prefix, failures=None):
    """Fault injection: lease renewals under `prefix` raise a store error that is not an OSError (as
    some fsspec backends raise), every time or for the first `failures` renewals."""
    real_write = storage.write_atomic
    failed = []

    def write_atomic(path, data):
        if (
            path.startswith(prefix)
            and "/.executor_lease." in path
            and (failures is None or len(failed) < failures)
        ):
            failed.append(path)
            raise RuntimeError("the store refused the write")
        real_write(path, data)

    monkeypatch.setattr(storage, "write_atomic", write_atomic)
    return failed


def _heartbeat_of(lease):
    return json.loads(Path(lease.path).read_text())["heartbeat"]


def test_heartbeat_survives_any_renewal_error_and_gives_up_a_lease_that_keeps_failing(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    failing = try_acquire(str(tmp_path / "a"), "a", timeout=60)
    healthy = try_acquire(str(tmp_path / "b"), "b", timeout=60)
    lost = threading.Event()
    failing.on_lost.append(lost.set)
    _failing_writes(monkeypatch, str(tmp_path / "a"))
    heartbeat = Heartbeat(0.02, lease_timeout=0.2)
    heartbeat.add(failing)
    heartbeat.add(healthy)
    try:
        assert lost.wait(30), "the failing lease was never given up"
        assert failing.lost and not failing.still_held()
        assert isinstance(failing.given_up, LeaseGivenUpError)
        assert "the store refused the write" in str(failing.given_up)
        assert isinstance(failing.given_up.__cause__, RuntimeError)
        before = _heartbeat_of(healthy)
        deadline = time.monotonic() + 30
        while _heartbeat_of(healthy) == before:  # the thread still beats
            assert time.monotonic() < deadline, "the heartbeat thread died"
            time.sleep(0.01)
    finally:
        heartbeat.stop()
    assert Path(failing.path).exists()  # kept for the runner to record the failure under...
    failing.release()
    assert not Path(failing.path).exists()  # ...then released, so another runner can take over at once


def test_heartbeat_rides_out_storage_errors_shorter_than_the_lease_timeout(tmp_path, monkeypatch):
    lease = try_acquire(str(tmp_path), "s", timeout=60)
    failed = _failing_writes(monkeypatch, str(tmp_path), failures=10)
    before = _heartbeat_of(lease)
    heartbeat = Heartbeat(0.01, lease_timeout=60)
    heartbeat.add(lease)
    try:
        deadline = time.monotonic() + 30
        while _heartbeat_of(lease) == before:  # renewed once the store recovered
            assert time.monotonic() < deadline, "the lease was never renewed"
            time.sleep(0.01)
    finally:
        heartbeat.stop()
    assert len(failed) == 10
    assert not lease.lost and lease.given_up is None and lease.still_held()


def test_giving_up_a_lease_on_failing_storage_stops_its_step_once(tmp_path, monkeypatch):
    lease = try_acquire(str(tmp_path), "s", timeout=60)
    stops = []
    lease.on_lost.append(lambda: stops.append("stop"))

    def read_bytes(path):
        raise RuntimeError("the store is unreachable")  # fault injection: every read fails

    monkeypatch.setattr(storage, "read_bytes", read_bytes)
    lease.give_up(LeaseGivenUpError("its heartbeat keeps failing"))
    assert stops == ["stop"] and lease.lost


class StoppableThreadCluster(ThreadCluster):
    """Threads that are told to stop: `cancel` sets an event the tasks here wait on (a ThreadCluster
    cannot kill a running thread; a LocalCluster would kill the step's process)."""

    def __init__(self):
        super().__init__()
        self.stop = threading.Event()
        self.reasons = []

    def cancel(self, future, reason="", *, grace_s=0.0):
        self.reasons.append(reason)
        self.stop.set()
        super().cancel(future, reason)


def test_a_step_whose_lease_renewals_keep_failing_is_lost_once_with_the_storage_error(tmp_path, monkeypatch):
    cluster = StoppableThreadCluster()
    executions = []

    def work(path):
        executions.append(path)
        if len(executions) == 1:  # the first attempt runs until it is stopped
            assert cluster.stop.wait(60), "the step was never stopped"
            raise RuntimeError("stopped")

    step = StepSpec(name="long", fn=work, version="1")
    # The heartbeat gives the lease up at its first failed beat after `lease_timeout - interval` (0.9 s)
    # without a renewal, at 1.1 s; the runner records LOST only while the lease file is fresh (2 s). So
    # the step's stop and its record get 0.9 s, which a loaded machine can take; a 0.4 s timeout left 0.1 s.
    runner = StepRunner(
        prefix=str(tmp_path), cluster=cluster, progress=False, lease_timeout=2.0, heartbeat_interval=1.1
    )
    _failing_writes(monkeypatch, str(tmp_path / "long-"))  # every renewal fails; status writes still work
    with pytest.raises(StepFailedError) as failed:
        runner.run([step])
    assert len(executions) == 1  # given up and lost, not retried in this run
    message = failed.value.failures["long"]
    assert "LeaseGivenUpError" in message and "the store refused the write" in message
    assert "the next run retries it (attempt 2 of 3)" in message  # not the step's own failure
    assert "could not be renewed" in cluster.reasons[0]  # the step was told why it was stopped
    out = Path(executions[0])
    events = json.loads((out / ".executor_status").read_text())["events"]
    assert [e["state"] for e in events] == ["RUNNING", "LOST"]
    assert "LeaseGivenUpError" in events[-1]["error"]
    assert not list(out.glob(".executor_lease.*"))
