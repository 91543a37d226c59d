"""The `processes` backend forks its workers only from a single-threaded driver, and both ways of
starting them write the same bytes and survive a worker that dies."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from jsonl_files import read_jsonl_dir

from zephyr import Dataset
from zephyr.backends.processes import default_start_method


def tag(record: dict) -> dict:
    return {**record, "len": len(record["text"])}


def die_once_at(record: dict, target: int, marker: str) -> dict:
    """Kill the whole worker process the first time it reaches `target` (a crash, not an exception)."""
    if record["id"] == target and not os.path.exists(marker):
        Path(marker).write_text("died here")
        os._exit(17)
    return record


def test_a_driver_without_other_python_threads_forks_even_with_numpy_loaded():
    code = (
        "import os, numpy; from zephyr.backends.processes import default_start_method; "
        "print(len(os.listdir('/proc/self/task')) > 1, default_start_method())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "fork"]  # numpy's OpenBLAS threads run, and are no bar


def test_a_driver_with_only_procpools_threads_forks():
    code = (
        "from procpool.lifeline import spawn; spawn(lambda: None); "
        "from zephyr.backends.processes import default_start_method; print(default_start_method())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "fork"


def test_a_driver_with_another_thread_never_forks():
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert default_start_method() in ("forkserver", "spawn")
    finally:
        stop.set()
        thread.join()


@pytest.mark.parametrize("start_method", ["fork", "forkserver"])
def test_forked_and_forkserver_workers_write_the_bytes_sync_writes(
    docs_dir: Path, tmp_path: Path, start_method
):
    ds = Dataset.from_files(str(docs_dir / "*.jsonl")).map(tag).filter(lambda r: r["id"] % 2 == 0)
    expected = ds.write_jsonl(str(tmp_path / "sync"), backend="sync", quiet=True)
    got = ds.write_jsonl(
        str(tmp_path / start_method),
        backend="processes",
        start_method=start_method,
        num_workers=2,
        quiet=True,
    )
    assert [Path(p).read_bytes() for p in got.paths] == [Path(p).read_bytes() for p in expected.paths]
    assert got.records_written == 15


def test_a_forked_worker_that_dies_is_replaced(docs_dir: Path, tmp_path: Path):
    marker = tmp_path / "died"
    ds = Dataset.from_files(str(docs_dir / "*.jsonl")).map(
        functools.partial(die_once_at, target=7, marker=str(marker))
    )
    result = ds.write_jsonl(
        str(tmp_path / "out"),
        backend="processes",
        start_method="fork",
        num_workers=2,
        max_retries=1,
        quiet=True,
    )
    assert marker.exists()
    assert sorted(r["id"] for r in read_jsonl_dir(tmp_path / "out")) == list(range(30))
    assert result.records_written == 30


def test_a_driver_that_initialised_cuda_never_forks(monkeypatch):
    torch = pytest.importorskip("torch")
    assert default_start_method() == "fork" or threading.active_count() > 1
    # No GPU here: stand in for a driver whose CUDA context exists (a forked child could not use CUDA).
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert default_start_method() in ("forkserver", "spawn")
