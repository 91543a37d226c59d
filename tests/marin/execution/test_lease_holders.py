"""A lease holder is host + machine id + pid + process start time: pids are judged only on their own
machine, and a heartbeat from the future is judged by the file's mtime."""

import os
import subprocess
import sys
import time

import orjson

from marin.execution import lease as lease_module
from marin.execution.lease import MACHINE_ID, Lease, try_acquire
from marin.execution.status import HOST


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _lease(path, *, machine, pid, heartbeat, host=HOST, pid_start=None):
    record = {
        "token": "t",
        "host": host,
        "machine": machine,
        "pid": pid,
        "pid_start": pid_start,
        "step": "s",
        "acquired": heartbeat,
        "heartbeat": heartbeat,
    }
    (path / ".executor_lease.0").write_bytes(orjson.dumps(record))


def test_the_lease_file_names_this_machine(tmp_path):
    lease = try_acquire(str(tmp_path), "s", timeout=60)
    assert isinstance(lease, Lease)
    record = orjson.loads((tmp_path / ".executor_lease.0").read_bytes())
    assert record["machine"] == MACHINE_ID != "" and record["host"] == HOST and record["pid"] == os.getpid()
    assert record["pid_start"] is not None


def test_a_machine_with_the_same_hostname_does_not_steal_a_fresh_lease_by_pid(tmp_path):
    _lease(tmp_path, machine="another-machine", pid=_dead_pid(), heartbeat=time.time())
    holder = try_acquire(str(tmp_path), "s", timeout=60)
    assert (
        not isinstance(holder, Lease) and holder.machine == "another-machine"
    )  # that pid is not ours to judge


def test_a_dead_pid_on_this_machine_frees_the_lease_at_once(tmp_path):
    _lease(tmp_path, machine=MACHINE_ID, pid=_dead_pid(), heartbeat=time.time())
    assert isinstance(try_acquire(str(tmp_path), "s", timeout=60), Lease)


def test_a_lease_without_a_machine_id_is_judged_by_its_heartbeat_only(tmp_path):
    _lease(tmp_path, machine="", pid=_dead_pid(), heartbeat=time.time())
    assert not isinstance(try_acquire(str(tmp_path), "s", timeout=60), Lease)


def test_a_heartbeat_far_in_the_future_is_judged_by_the_file_mtime(tmp_path):
    _lease(tmp_path, machine="another-machine", pid=1, heartbeat=time.time() + 10_000)
    old = time.time() - 120
    os.utime(tmp_path / ".executor_lease.0", (old, old))
    assert isinstance(try_acquire(str(tmp_path), "s", timeout=60), Lease)


def test_a_heartbeat_slightly_in_the_future_is_still_honoured(tmp_path):
    _lease(tmp_path, machine="another-machine", pid=1, heartbeat=time.time() + 30)  # a skewed clock
    old = time.time() - 120
    os.utime(tmp_path / ".executor_lease.0", (old, old))
    assert not isinstance(try_acquire(str(tmp_path), "s", timeout=60), Lease)


def test_a_future_heartbeat_with_a_fresh_mtime_is_honoured(tmp_path):
    _lease(tmp_path, machine="another-machine", pid=1, heartbeat=time.time() + 10_000)
    holder = try_acquire(str(tmp_path), "s", timeout=60)
    assert not isinstance(holder, Lease)
    assert lease_module.current_holder(str(tmp_path), 60) is not None


def test_a_reused_pid_on_this_machine_with_another_start_time_is_not_the_holder(tmp_path):
    # A live process holds this pid now, but it started long after the recorded holder did: the pid
    # was reused, and the holder it names is gone.
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        started = lease_module.process_start(sleeper.pid)
        _lease(tmp_path, machine=MACHINE_ID, pid=sleeper.pid, pid_start=started - 3600, heartbeat=time.time())
        assert isinstance(try_acquire(str(tmp_path), "s", timeout=60), Lease)

        # The same pid with its own start time is the live holder: the lease stays its.
        other = tmp_path / "other"
        other.mkdir()
        _lease(other, machine=MACHINE_ID, pid=sleeper.pid, pid_start=started, heartbeat=time.time())
        holder = try_acquire(str(other), "s", timeout=60)
        assert not isinstance(holder, Lease) and holder.pid == sleeper.pid
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_step_of_the_wall_clock_leaves_a_live_holder_live(tmp_path, monkeypatch):
    import psutil

    lease = try_acquire(str(tmp_path), "s", timeout=60)
    assert isinstance(lease, Lease)
    # What the clock stepped by a second (NTP, a resumed VM) does to the wall-clock start time of every
    # process: the kernel's boot time moves. The holder, this process, is as alive as before.
    before, boot_time = psutil.Process(os.getpid()).create_time(), psutil.boot_time()
    monkeypatch.setattr(psutil._pslinux, "boot_time", lambda: boot_time + 1)
    assert psutil.Process(os.getpid()).create_time() == before + 1
    holder = try_acquire(str(tmp_path), "s", timeout=60)
    assert not isinstance(holder, Lease) and holder.pid == os.getpid()


def test_a_holder_of_an_earlier_boot_of_this_machine_is_dead(tmp_path):
    pid, started = os.getpid(), lease_module.process_start(os.getpid())
    _lease(tmp_path, machine=MACHINE_ID, pid=pid, pid_start=started, heartbeat=time.time())
    record = orjson.loads((tmp_path / ".executor_lease.0").read_bytes())
    (tmp_path / ".executor_lease.0").write_bytes(orjson.dumps({**record, "boot": "an-earlier-boot"}))
    assert isinstance(try_acquire(str(tmp_path), "s", timeout=60), Lease)
