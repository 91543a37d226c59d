"""LocalCluster's dispatch runs on the process's one thread pool (fray.cluster.threads), which the
step runner's drivers share: a task submitted from a pool thread runs on that thread when it asks
for the result, every other one on an idle pool thread; shutdown resolves what no one waited for."""

from __future__ import annotations

import concurrent.futures
import os
import threading

from fray.cluster import LocalCluster, ResourceConfig, TaskCancelledError
from fray.cluster.threads import ThreadPool, shared_pool

ONE = ResourceConfig.with_cpu(1)


def _pool_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("fray-thread")}


def _sleep_then_touch(path: str) -> None:
    import time

    time.sleep(0.3)
    open(path, "w").close()


def _on_the_pool(fn):
    """fn() called on a thread of the shared pool, as a step driver is; its value (or exception)."""
    done: concurrent.futures.Future = concurrent.futures.Future()

    def call():
        try:
            done.set_result(fn())
        except BaseException as e:
            done.set_exception(e)

    shared_pool().submit(call)
    return done.result(timeout=60)


def test_a_deferred_call_runs_on_the_deferring_thread_after_its_call_or_when_run_now():
    pool = ThreadPool()
    seen: dict[str, str] = {}
    after_ran = threading.Event()

    def later(tag: str) -> None:
        seen[tag] = threading.current_thread().name
        if tag == "after":
            after_ran.set()

    def first() -> None:
        seen["first"] = threading.current_thread().name
        pool.defer(later, "after")  # runs once this call returns
        now = pool.defer(later, "now")
        assert pool.run_now(now) and not pool.run_now(now)  # once only
        seen["checked"] = "now" in seen and "after" not in seen

    pool.submit(first)
    assert after_ran.wait(30)
    assert seen["checked"] is True
    assert seen["now"] == seen["after"] == seen["first"]


def test_a_call_never_waits_for_a_busy_thread():
    pool = ThreadPool()
    release, started = threading.Event(), threading.Barrier(5, timeout=30)

    def block() -> None:
        started.wait()
        release.wait(30)

    for _ in range(4):
        pool.submit(block)
    started.wait()  # four calls run at once: each found every thread busy and got a new one
    assert pool.working() == 4
    release.set()


def test_a_task_submitted_from_a_pool_thread_runs_on_that_thread_without_a_hand_off(tmp_path):
    cluster = LocalCluster(cpu=2, gpus=0)
    try:
        before = _pool_threads()

        def submit_and_wait():
            runs = [
                cluster.submit(os.getpid, name=f"t{i}", log_path=str(tmp_path / f"t{i}.log")).result()
                for i in range(5)
            ]
            return runs, threading.current_thread()

        pids, thread = _on_the_pool(submit_and_wait)
        assert len(set(pids)) == 1 and os.getpid() not in pids  # one warm worker process, not this one
        assert _pool_threads() - before <= {thread}  # no thread besides the submitting one
        assert all((tmp_path / f"t{i}.log").read_text().startswith("=== fray: task") for i in range(5))
    finally:
        cluster.shutdown()


def test_tasks_from_other_threads_run_on_the_pool_and_can_be_waited_for_without_result(tmp_path):
    cluster = LocalCluster(cpu=1, gpus=0)
    try:
        slow = cluster.submit(lambda: _sleep_then_touch(str(tmp_path / "slow")), name="slow")
        queued = cluster.submit(os.getpid, name="queued")
        assert not queued.running()  # the one core is busy
        done, _ = concurrent.futures.wait([slow, queued], timeout=30)  # wait() never runs a task itself
        assert done == {slow, queued} and isinstance(queued.result(), int)
    finally:
        cluster.shutdown()


def test_shutdown_waits_for_running_tasks_and_cancels_queued_ones(tmp_path):
    cluster = LocalCluster(cpu=2, gpus=0)
    futures = [
        cluster.submit(
            lambda i=i: _sleep_then_touch(str(tmp_path / f"done.{i}")), name=f"slow{i}", resources=ONE
        )
        for i in range(3)
    ]
    while sum(f.running() for f in futures) < 2:  # two run (one core each); the third waits for a core
        pass
    cluster.shutdown()
    assert [f.cancelled() for f in futures] == [False, False, True]
    assert all(f.exception() is None for f in futures[:2])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["done.0", "done.1"]


def test_shutdown_resolves_a_task_whose_pool_thread_submitter_never_asked_for_its_result(tmp_path):
    cluster = LocalCluster(cpu=2, gpus=0)
    ran = _on_the_pool(lambda: cluster.submit(lambda: _sleep_then_touch(str(tmp_path / "ran")), name="ran"))
    cluster.shutdown()
    assert ran.done() and ran.exception() is None and (tmp_path / "ran").exists()


def test_a_cancelled_task_kept_for_its_submitter_never_runs(tmp_path):
    cluster = LocalCluster(cpu=2, gpus=0)

    def submit_cancel_wait():
        future = cluster.submit(lambda: _sleep_then_touch(str(tmp_path / "ran")), name="never")
        cluster.cancel(future, reason="told to stop")
        try:
            future.result()
        except TaskCancelledError as e:
            return str(e)
        return "returned"

    try:
        message = _on_the_pool(submit_cancel_wait)
        assert "told to stop" in message and "before it ran" in message
        assert not (tmp_path / "ran").exists()
    finally:
        cluster.shutdown()


def test_a_deferred_call_holds_nothing_once_it_ran():
    """A call run by run_now is dropped at once: a driver that runs thousands of steps in one chain of
    deferred calls keeps none of their tasks alive."""
    import gc
    import weakref

    class Task:
        pass

    pool = ThreadPool()
    freed = concurrent.futures.Future()

    def chain():
        task = Task()
        ref = weakref.ref(task)
        call = pool.defer(lambda t: None, task)
        del task
        pool.run_now(call)
        gc.collect()
        freed.set_result(ref() is None)

    pool.submit(chain)
    assert freed.result(timeout=30)
