"""LocalCluster keeps its dispatch threads for the next task and ends them all at shutdown."""

from __future__ import annotations

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
