"""LocalCluster shares the cores among the tasks running at once: a task gets the cores its
ResourceConfig asks for, one that asks for none gets its share of what is free (every core when
alone), and its process is told its count before it runs (thread variables, torch's threads)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from fray.cluster import LocalCluster, ResourceConfig
from fray.cluster.local_cluster import THREAD_VARS
from fray.cluster.threads import shared_pool

pytestmark = pytest.mark.timeout(180)


def _threads_told() -> dict[str, str | None]:
    return {name: os.environ.get(name) for name in THREAD_VARS}


def _hold(seconds: float) -> tuple[int, float, float]:
    """(the thread count this task was told, when it started, when it ended)."""
    start = time.time()
    time.sleep(seconds)
    return int(os.environ["OMP_NUM_THREADS"]), start, time.time()


def _torch_threads() -> tuple[int, int]:
    import torch

    return os.getpid(), torch.get_num_threads()


def test_a_task_alone_gets_every_core_and_one_that_asks_gets_what_it_asks(monkeypatch):
    for name in THREAD_VARS:
        monkeypatch.delenv(name, raising=False)
    cluster = LocalCluster(cpu=4, gpus=0)
    try:
        alone = cluster.submit(_threads_told, name="alone").result(timeout=60)
        assert alone == dict.fromkeys(THREAD_VARS, "4")
        asked = cluster.submit(_threads_told, name="asked", resources=ResourceConfig.with_cpu(2)).result(
            timeout=60
        )
        assert asked == dict.fromkeys(THREAD_VARS, "2")
        half = cluster.submit(_threads_told, name="half", resources=ResourceConfig.with_cpu(0.5)).result(
            timeout=60
        )
        assert half["OMP_NUM_THREADS"] == "1"  # a fraction of a core is still one thread
    finally:
        cluster.shutdown()


def test_a_variable_the_runner_sets_itself_is_left_alone(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    cluster = LocalCluster(cpu=2, gpus=0)
    try:
        told = cluster.submit(_threads_told, name="mine").result(timeout=60)
        assert told["OMP_NUM_THREADS"] == "3" and told["RAYON_NUM_THREADS"] == "2"
        # the BLAS pools follow it: more of their threads than torch's would spin beside its own
        assert told["MKL_NUM_THREADS"] == told["OPENBLAS_NUM_THREADS"] == "3"
    finally:
        cluster.shutdown()


def test_tasks_submitted_together_by_drivers_share_the_cores_and_never_exceed_them(monkeypatch):
    """Four step drivers on the pool submit at once: each task is told a share, and the counts of
    the tasks running at any moment never add up to more than the cores."""
    for name in THREAD_VARS:
        monkeypatch.delenv(name, raising=False)
    cluster = LocalCluster(cpu=2, gpus=0)
    ready = threading.Barrier(4, timeout=60)
    results: list = []
    lock = threading.Lock()
    done = threading.Semaphore(0)

    def driver(i: int) -> None:
        ready.wait()  # every driver is preparing (working) when the first submits
        value = cluster.submit(lambda: _hold(0.4), name=f"t{i}").result(timeout=120)
        with lock:
            results.append(value)
        done.release()

    try:
        for i in range(4):
            shared_pool().submit(driver, i)
        for _ in range(4):
            assert done.acquire(timeout=150)
    finally:
        cluster.shutdown()
    assert [threads for threads, _, _ in results] == [1, 1, 1, 1]
    moments = sorted({t for _, start, end in results for t in (start, end)})
    for now in moments:
        running = sum(threads for threads, start, end in results if start <= now < end)
        assert running <= 2


def test_a_warm_worker_that_loaded_torch_gives_each_task_its_own_count(monkeypatch):
    for name in THREAD_VARS:
        monkeypatch.delenv(name, raising=False)
    cluster = LocalCluster(cpu=2, gpus=0)
    try:
        pid, threads = cluster.submit(_torch_threads, name="alone").result(timeout=120)
        assert threads == 2  # torch loaded in this task: it read OMP_NUM_THREADS
        one = ResourceConfig.with_cpu(1)
        assert cluster.submit(_torch_threads, name="one", resources=one).result(timeout=120) == (pid, 1)
        assert cluster.submit(_torch_threads, name="alone again").result(timeout=120) == (pid, 2)
    finally:
        cluster.shutdown()
