"""Every backend writes the same bytes; a worker that dies mid-shard is replaced and its shard retried.

The Ray test runs on a real local Ray cluster that a module fixture starts and stops.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import cloudpickle
import pytest
from jsonl_files import read_jsonl_dir

from zephyr import Dataset

ray = pytest.importorskip("ray")


def clean(record: dict) -> dict:
    return {"id": record["id"], "text": record["text"].strip().upper(), "user": record["user"]}


def words(record: dict) -> list[dict]:
    return [{"user": record["user"], "word": w} for w in record["text"].split()]


def count_words(user_and_word: tuple, items) -> dict:
    user, word = user_and_word
    return {"user": user, "word": word, "n": sum(1 for _ in items)}


def pipeline(docs_dir: Path) -> Dataset:
    """Row ops, a group_by, a deduplicate and a reshard: three shuffles, four stages."""
    return (
        Dataset.from_files(str(docs_dir / "*.jsonl"))
        .map(clean)
        .filter(lambda r: r["id"] % 5 != 0)
        .flat_map(words)
        .group_by(lambda r: (r["user"], r["word"]), count_words, num_shards=3)
        .deduplicate(lambda r: (r["word"], r["n"]))
        .reshard(2)
    )


def shard_summary(records, shard) -> list[dict]:
    """A token-cache-like consumer: it would write its own files; here it reports what it saw."""
    ids = [r["id"] for r in records]
    return [
        {"shard": shard.index, "of": shard.count, "files": [Path(p).name for p in shard.paths], "ids": ids}
    ]


def output_bytes(result) -> list[bytes]:
    return [Path(p).read_bytes() for p in result.paths]


@pytest.fixture(scope="module")
def ray_cluster(ray_nodes):
    """The session's real two-node Ray cluster; this test module's functions travel by value."""
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def test_sync_processes_and_ray_write_identical_bytes(docs_dir: Path, tmp_path: Path, ray_cluster):
    ds = pipeline(docs_dir)
    outputs = {
        backend: output_bytes(
            ds.write_jsonl(str(tmp_path / backend), compression="gzip", backend=backend, quiet=True)
        )
        for backend in ("sync", "processes", "ray")
    }
    assert outputs["sync"] == outputs["processes"] == outputs["ray"]
    assert len(outputs["sync"]) == 2 and all(outputs["sync"])


def test_map_shard_summaries_come_back_through_collect_on_every_backend(docs_dir: Path, ray_cluster):
    ds = Dataset.from_files(str(docs_dir / "*.jsonl")).map_shard(shard_summary)
    expected = [
        {"shard": i, "of": 3, "files": [f"docs-{i}.jsonl"], "ids": list(range(10 * i, 10 * i + 10))}
        for i in range(3)
    ]
    for backend in ("sync", "processes", "ray"):
        assert ds.collect(backend=backend, quiet=True) == expected


def die_once_at(record: dict, target: int, marker: str) -> dict:
    """Kill the whole worker process the first time it reaches `target` (a crash, not an exception)."""
    if record["id"] == target and not os.path.exists(marker):
        Path(marker).write_text("died here")
        os._exit(17)
    return record


def test_worker_killed_mid_shard_is_replaced_and_output_is_complete(docs_dir: Path, tmp_path: Path):
    marker = tmp_path / "died"
    out = tmp_path / "out"
    ds = Dataset.from_files(str(docs_dir / "*.jsonl")).map(
        functools.partial(die_once_at, target=14, marker=str(marker))
    )
    result = ds.write_jsonl(str(out), backend="processes", num_workers=2, max_retries=2, quiet=True)
    assert marker.exists()  # the worker really died once
    assert sorted(r["id"] for r in read_jsonl_dir(out)) == list(range(30))
    assert result.records_written == 30
    assert sorted(p.name for p in out.iterdir()) == [Path(p).name for p in result.paths]  # no temp files left
