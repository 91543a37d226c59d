"""Cluster.cancel: a running task's process is killed and its future fails naming the reason; a
queued task never starts."""

from __future__ import annotations

import functools
import os
import signal
import threading
import time
from pathlib import Path

import psutil
import pytest

from fray.cluster import LocalCluster, ResourceConfig, TaskCancelledError, ThreadCluster

pytestmark = pytest.mark.timeout(180)


def _publish_pid_and_hang(pid_file: str) -> None:
    tmp = f"{pid_file}.tmp"
    Path(tmp).write_text(str(os.getpid()))
    os.replace(tmp, pid_file)
    time.sleep(600)


def _touch(path: str) -> None:
    Path(path).write_text("ran")


def _wait_for_pid(pid_file: Path) -> int:
    deadline = time.monotonic() + 120
    while not pid_file.exists():
        assert time.monotonic() < deadline, "the task never started"
        time.sleep(0.02)
    return int(pid_file.read_text())


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_local_cluster_cancel_kills_the_running_task_and_keeps_a_queued_one_from_starting(tmp_path):
    cluster = LocalCluster(cpu=1, gpus=0)
    try:
        running = cluster.submit(
            functools.partial(_publish_pid_and_hang, str(tmp_path / "pid")),
            name="hang",
            resources=ResourceConfig.with_cpu(1),
        )
        queued = cluster.submit(
            functools.partial(_touch, str(tmp_path / "queued-ran")),
            name="queued",
            resources=ResourceConfig.with_cpu(1),
        )
        pid = _wait_for_pid(tmp_path / "pid")
        cluster.cancel(queued, reason="not needed")
        cluster.cancel(running, reason="its step lost its lease")
        with pytest.raises(
            TaskCancelledError, match=r"'hang' was cancelled \(its step lost its lease\).*killed"
        ):
            running.result(timeout=60)
        assert queued.cancelled() and _gone(pid)
        after = cluster.submit(os.getpid, name="after")  # the cluster goes on with a fresh worker
        assert after.result(timeout=60) != pid
    finally:
        cluster.shutdown(kill_running=True)
    assert not (tmp_path / "queued-ran").exists()


def test_thread_cluster_cancel_keeps_a_queued_task_from_starting(tmp_path):
    cluster = ThreadCluster(max_workers=1)
    release = threading.Event()
    try:
        busy = cluster.submit(release.wait, name="busy")
        queued = cluster.submit(functools.partial(_touch, str(tmp_path / "ran")), name="queued")
        cluster.cancel(queued, reason="not needed")
        assert queued.cancelled()
    finally:
        release.set()
        cluster.shutdown()
    assert busy.result() is True and not (tmp_path / "ran").exists()


def test_ray_cluster_cancel_kills_the_running_task(ray_cluster, tmp_path):
    future = ray_cluster.submit(
        functools.partial(_publish_pid_and_hang, str(tmp_path / "pid")),
        name="hang",
        resources=ResourceConfig.with_cpu(1),
    )
    pid = _wait_for_pid(tmp_path / "pid")
    ray_cluster.cancel(future, reason="its step lost its lease")
    with pytest.raises(TaskCancelledError, match="its step lost its lease"):
        future.result(timeout=120)
    deadline = time.monotonic() + 60
    while not _gone(pid):
        assert time.monotonic() < deadline, "the Ray worker running the task was not killed"
        time.sleep(0.05)


def _raise_value_error() -> None:
    raise ValueError("the task's own bug")


def test_local_cluster_cancel_of_a_finished_task_leaves_its_warm_worker_running(tmp_path):
    cluster = LocalCluster(cpu=1, gpus=0)
    try:
        finished = cluster.submit(os.getpid, name="finished")
        pid = finished.result(timeout=60)
        cluster.cancel(finished, reason="its step lost its lease as it finished")
        assert finished.result() == pid
        follow_up = cluster.submit(os.getpid, name="follow-up")
        assert follow_up.result(timeout=60) == pid  # the same warm worker, not killed
    finally:
        cluster.shutdown(kill_running=True)


def test_local_cluster_cancel_as_each_task_resolves_never_kills_the_next_task(tmp_path):
    # Each future is cancelled from its done callback: the moment its worker has just gone back to the
    # pool and the next queued task may already be running on it.
    cluster = LocalCluster(cpu=1, gpus=0)
    try:
        futures = []
        for i in range(40):
            future = cluster.submit(os.getpid, name=f"task-{i}")
            future.add_done_callback(
                functools.partial(cluster.cancel, reason="lease lost as the step finished")
            )
            futures.append(future)
        pids = [future.result(timeout=120) for future in futures]
    finally:
        cluster.shutdown(kill_running=True)
    assert len(set(pids)) == 1  # one warm worker ran them all; no cancel killed it


def test_ray_cluster_cancel_of_a_settled_future_changes_nothing(ray_cluster):
    done = ray_cluster.submit(
        functools.partial(int, "7"), name="done", resources=ResourceConfig.with_cpu(0.5)
    )
    failed = ray_cluster.submit(_raise_value_error, name="failed", resources=ResourceConfig.with_cpu(0.5))
    assert done.result(timeout=120) == 7
    with pytest.raises(ValueError, match="the task's own bug"):
        failed.result(timeout=120)
    for future in (done, failed):
        ray_cluster.cancel(future, reason="lease lost as the step finished")
        assert future not in ray_cluster._refs and future not in ray_cluster._cancelled
    assert done.result() == 7
    with pytest.raises(ValueError, match="the task's own bug"):
        failed.result()


def _checkpoint_on_sigterm(folder: str, ignore: bool) -> str:
    """Publish the pid, then wait; SIGTERM writes `folder/checkpoint` and returns (or is ignored)."""
    stopped = threading.Event()

    def on_sigterm(signum, frame):
        if not ignore:
            Path(folder, "checkpoint").write_text("step 7")
            stopped.set()

    signal.signal(signal.SIGTERM, on_sigterm)
    _publish_pid_and_hang_until(str(Path(folder, "pid")), stopped)
    return "stopped cleanly"


def _publish_pid_and_hang_until(pid_file: str, stopped: threading.Event) -> None:
    tmp = f"{pid_file}.tmp"
    Path(tmp).write_text(str(os.getpid()))
    os.replace(tmp, pid_file)
    stopped.wait(600)


@pytest.mark.parametrize("ignore", [False, True], ids=["handles-sigterm", "ignores-sigterm"])
def test_local_cluster_cancel_sends_sigterm_then_sigkill_after_the_grace_period(tmp_path, ignore):
    cluster = LocalCluster(cpu=1, gpus=0)
    try:
        future = cluster.submit(
            functools.partial(_checkpoint_on_sigterm, str(tmp_path), ignore), name="train"
        )
        pid = _wait_for_pid(tmp_path / "pid")
        started = time.monotonic()
        cluster.cancel(future, reason="the runner got SIGINT", grace_s=1.0)
        if ignore:  # killed once the grace period is over
            with pytest.raises(TaskCancelledError, match="SIGTERM, then killed"):
                future.result(timeout=60)
            assert time.monotonic() - started >= 0.9 and not (tmp_path / "checkpoint").exists()
        else:  # its handler wrote the checkpoint and the task ended by itself, before the grace was over
            assert future.result(timeout=60) == "stopped cleanly"
            assert (tmp_path / "checkpoint").read_text() == "step 7"
        deadline = time.monotonic() + 30
        while not _gone(pid):  # a worker that got SIGTERM is never reused
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert cluster.submit(os.getpid, name="after").result(timeout=60) != pid
    finally:
        cluster.shutdown(kill_running=True)
