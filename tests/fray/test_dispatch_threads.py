"""LocalCluster keeps its dispatch threads for the next task and ends them all at shutdown."""

from __future__ import annotations

import concurrent.futures
import os
import threading

from fray.cluster import LocalCluster


def _dispatch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "fray-local-dispatch"]


def test_sequential_tasks_reuse_dispatch_threads_and_shutdown_ends_them(tmp_path):
    before = set(_dispatch_threads())
    cluster = LocalCluster(cpu=2, gpus=0)
    try:
        pids = [
            cluster.submit(os.getpid, name=f"t{i}", log_path=str(tmp_path / f"t{i}.log")).result()
            for i in range(20)
        ]
        started = set(_dispatch_threads()) - before
        assert 1 <= len(started) <= 2  # one task at a time needs no thread per task
        assert len(set(pids)) == 1  # and one warm worker
        assert all((tmp_path / f"t{i}.log").read_text().startswith("=== fray: task") for i in range(20))
    finally:
        cluster.shutdown()
    assert not any(t.is_alive() for t in started)


def _sleep_then_touch(path: str) -> None:
    import time

    time.sleep(0.3)
    open(path, "w").close()


def test_shutdown_waits_for_running_tasks_and_cancels_queued_ones(tmp_path):
    before = set(_dispatch_threads())
    cluster = LocalCluster(cpu=2, gpus=0)
    futures = [
        cluster.submit(lambda i=i: _sleep_then_touch(str(tmp_path / f"done.{i}")), name=f"slow{i}")
        for i in range(3)
    ]
    while sum(f.running() for f in futures) < 2:  # two run (one core each); the third waits for a core
        pass
    started = set(_dispatch_threads()) - before
    cluster.shutdown()
    assert [f.cancelled() for f in futures] == [False, False, True]
    assert all(f.exception() is None for f in futures[:2])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["done.0", "done.1"]
    assert len(started) == 2 and not any(t.is_alive() for t in started)


def test_an_inline_task_is_dispatched_by_its_callers_result_without_a_dispatch_thread(tmp_path):
    before = set(_dispatch_threads())
    cluster = LocalCluster(cpu=2, gpus=0)
    try:
        pids = [
            cluster.submit_inline(os.getpid, name=f"t{i}", log_path=str(tmp_path / f"t{i}.log")).result()
            for i in range(5)
        ]
        assert len(set(pids)) == 1 and os.getpid() not in pids  # one warm worker process, not this one
        assert set(_dispatch_threads()) == before
        assert all((tmp_path / f"t{i}.log").read_text().startswith("=== fray: task") for i in range(5))
    finally:
        cluster.shutdown()


def test_an_inline_task_that_must_queue_is_dispatched_by_a_thread_once_a_core_is_free(tmp_path):
    cluster = LocalCluster(cpu=1, gpus=0)
    try:
        slow = cluster.submit(lambda: _sleep_then_touch(str(tmp_path / "slow")), name="slow")
        queued = cluster.submit_inline(os.getpid, name="queued")
        assert not queued.running()  # the one core is busy
        assert slow.result() is None
        # wait(), unlike result(), never runs an inline task itself: only a dispatch thread can finish it.
        concurrent.futures.wait([queued], timeout=30)
        assert queued.done() and isinstance(queued.result(), int)
    finally:
        cluster.shutdown()


def test_shutdown_resolves_an_inline_task_whose_caller_never_asked_for_its_result(tmp_path):
    cluster = LocalCluster(cpu=2, gpus=0)
    ran = cluster.submit_inline(lambda: _sleep_then_touch(str(tmp_path / "ran")), name="ran")
    cluster.shutdown()
    assert ran.done() and ran.exception() is None and (tmp_path / "ran").exists()


def test_a_cancelled_inline_task_never_runs(tmp_path):
    from fray.cluster.errors import TaskCancelledError

    cluster = LocalCluster(cpu=2, gpus=0)
    try:
        future = cluster.submit_inline(lambda: _sleep_then_touch(str(tmp_path / "ran")), name="never")
        cluster.cancel(future, reason="told to stop")
        try:
            future.result()
        except TaskCancelledError as e:
            assert "told to stop" in str(e) and "before it ran" in str(e)
        else:
            raise AssertionError("a cancelled task must not return")
        assert not (tmp_path / "ran").exists()
    finally:
        cluster.shutdown()
