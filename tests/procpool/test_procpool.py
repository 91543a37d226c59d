"""procpool: workers started by exec and by fork answer requests, a worker's death reaches whoever
waits for it, and the pool reuses warm workers."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from procpool.pool import Pool
from procpool.process import WorkerLostError, WorkerProcess, ready

pytestmark = pytest.mark.timeout(120)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _exec_worker(handler: str = "tests.procpool.handlers:obey", setup: str | None = None) -> WorkerProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, *sys.path])}
    return WorkerProcess(handler, start="exec", setup=setup, env=env)


@pytest.mark.parametrize("start", ["exec", "fork", "forkserver"])
def test_a_worker_answers_requests_one_after_another_after_running_its_setup(start):
    handler, setup = "tests.procpool.handlers:echo_pid", "tests.procpool.handlers:mark_started"
    worker = (
        _exec_worker(handler, setup) if start == "exec" else WorkerProcess(handler, start=start, setup=setup)
    )
    try:
        replies = [worker.call(f"request {i}".encode()).decode().split() for i in range(3)]
    finally:
        worker.close()
    assert [r[:2] for r in replies] == [["request", str(i)] for i in range(3)]
    assert {r[2] for r in replies} == {str(worker.pid)} != {str(os.getpid())}
    assert {r[3] for r in replies} == {"True"}
    assert not worker.alive()


@pytest.mark.parametrize("start", ["exec", "fork"])
def test_a_worker_that_dies_mid_request_raises_worker_lost(start):
    worker = _exec_worker() if start == "exec" else WorkerProcess("tests.procpool.handlers:obey", start=start)
    with pytest.raises(WorkerLostError):
        worker.call(b"die")
    assert worker.exit_code() == 7
    worker.close()


def test_ready_returns_the_workers_with_a_reply_or_a_death_and_not_the_busy_ones():
    workers = [_exec_worker() for _ in range(3)]
    try:
        for worker, request in zip(workers, [b"hello", b"die", b"sleep"], strict=True):
            worker.send(request)
        done = set()
        while len(done) < 2:
            done.update(ready(workers, timeout=30))
        assert done == {workers[0], workers[1]}
        assert workers[0].poll_reply() == b"hello"
        with pytest.raises(WorkerLostError):
            workers[1].poll_reply()
        assert workers[2].poll_reply() is None
    finally:
        for worker in workers:
            worker.kill()
            worker.close()


def test_killing_a_busy_worker_from_another_thread_ends_the_wait_for_its_reply():
    worker = _exec_worker()
    timer = threading.Timer(0.5, worker.kill)
    timer.start()
    with pytest.raises(WorkerLostError):
        worker.call(b"sleep")
    timer.join()
    worker.close()


def test_the_pool_hands_out_a_warm_idle_worker_unless_told_not_to_reuse():
    pool = Pool(max_idle=1)
    first = pool.take(_exec_worker)
    pool.give_back(first)
    assert pool.take(_exec_worker) is first
    dedicated = pool.take(_exec_worker, reuse=False)
    assert dedicated is not first
    pool.give_back(first)
    pool.give_back(dedicated)  # no room: ended
    assert first.alive() and not dedicated.alive()
    pool.close()
    assert not first.alive()


def test_a_dead_idle_worker_is_never_handed_out():
    pool = Pool(max_idle=1)
    worker = pool.take(_exec_worker)
    pool.give_back(worker)
    worker.kill()
    replacement = pool.take(_exec_worker)
    assert replacement is not worker and replacement.call(b"x") == b"x"
    pool.give_back(replacement)
    pool.close()
