"""Dataset semantics on the in-process backend: operations, laziness, the plan, take/count/window."""

from __future__ import annotations

from pathlib import Path

import pytest

from zephyr import Dataset, PlanError, ShardFailedError
from zephyr.ops import Filter, FlatMap, Map
from zephyr.plan import CollectSink

SYNC = {"backend": "sync", "quiet": True}


def test_row_operations_compose_like_plain_python():
    ds = (
        Dataset.from_list(list(range(50)), num_shards=4)
        .map(lambda x: x * 3)
        .filter(lambda x: x % 2 == 0)
        .flat_map(lambda x: [x, -x])
    )
    expected = [y for x in range(50) if (x * 3) % 2 == 0 for y in (x * 3, -x * 3)]
    assert ds.collect(**SYNC) == expected
    assert ds.count(**SYNC) == len(expected)
    assert ds.take(5, **SYNC) == expected[:5]


def test_nothing_runs_until_the_pipeline_is_executed(tmp_path: Path):
    def boom(record):
        raise RuntimeError("ran too early")

    ds = Dataset.from_files(str(tmp_path / "missing-*.jsonl")).map(boom)  # no file matches, fn would raise
    assert isinstance(ds.ops[0], Map)
    with pytest.raises(PlanError, match="no input files match"):
        ds.collect(**SYNC)


def test_planner_fuses_row_ops_and_cuts_stages_only_at_shuffles():
    ds = (
        Dataset.from_list([1, 2, 3])
        .map(str)
        .filter(bool)
        .flat_map(list)
        .group_by(lambda s: s, lambda k, it: k)
        .map(int)
        .reshard(2)
        .filter(bool)
    )
    plan = ds.plan(CollectSink())
    assert [len(stage.ops) for stage in plan.stages] == [3, 1, 1]
    assert [type(op) for op in plan.stages[0].ops] == [Map, Filter, FlatMap]
    text = plan.explain(1)
    assert "Stage 0 [1 shard(s)]" in text
    assert "fused: map(str) -> filter(bool) -> flat_map(list)" in text
    assert "reshard(2)" in text and "Stage 2 [2 shard(s)]" in text


def test_explain_prints_the_plan(capsys):
    text = Dataset.from_list([1], num_shards=2).map(abs).deduplicate().explain()
    assert capsys.readouterr().out.strip() == text
    assert "deduplicate(key=record)" in text and "Stage 1 [2 shard(s)]" in text


def test_window_groups_consecutive_records_within_each_shard():
    ds = Dataset.from_list(list(range(7)), num_shards=2).window(2)
    assert ds.collect(**SYNC) == [[0, 1], [2], [3, 4], [5, 6]]


def test_map_shard_sees_index_count_and_source_file(docs_dir: Path):
    def summarize(records, shard):
        yield {
            "index": shard.index,
            "count": shard.count,
            "paths": list(shard.paths),
            "n": sum(1 for _ in records),
        }

    summaries = Dataset.from_files(str(docs_dir / "*.jsonl")).map_shard(summarize).collect(**SYNC)
    files = sorted(str(p) for p in docs_dir.glob("*.jsonl"))
    assert summaries == [{"index": i, "count": 3, "paths": [files[i]], "n": 10} for i in range(3)]


def test_reshard_keeps_every_record_and_changes_the_shard_count():
    ds = Dataset.from_list(list(range(100)), num_shards=3).reshard(5)
    shard_sizes = ds.map_shard(lambda records, shard: [sum(1 for _ in records)]).collect(**SYNC)
    assert len(shard_sizes) == 5 and sum(shard_sizes) == 100
    assert sorted(ds.collect(**SYNC)) == list(range(100))


def test_from_iterable_streams_a_generator_once():
    ds = Dataset.from_iterable(({"i": i} for i in range(25)), num_shards=1)
    assert ds.map(lambda r: r["i"]).collect(**SYNC) == list(range(25))


def test_persistent_failure_names_shard_file_line_and_exception(docs_dir: Path):
    def fail_on_17(record):
        if record["id"] == 17:
            raise ValueError("cannot handle document 17")
        return record

    ds = Dataset.from_files(str(docs_dir / "*.jsonl")).map(fail_on_17)
    with pytest.raises(ShardFailedError) as info:
        ds.collect(backend="sync", quiet=True, max_retries=1)
    err = info.value
    assert (err.stage, err.shard, err.line, err.attempts) == (0, 1, 8, 2)
    assert err.file.endswith("docs-1.jsonl")
    assert err.error_type == "ValueError"
    message = str(err)
    assert "docs-1.jsonl:8" in message and "cannot handle document 17" in message


def test_exception_with_an_empty_message_is_retried_and_reported_by_its_type():
    def fail_silently(record):
        if record == 3:
            raise SilentError()
        return record

    with pytest.raises(ShardFailedError) as info:
        Dataset.from_list(list(range(6)), num_shards=2).map(fail_silently).collect(**SYNC, max_retries=1)
    err = info.value
    assert (err.shard, err.attempts, err.error_type, err.error_message) == (1, 2, "SilentError", "")
    assert "SilentError" in str(err)


class SilentError(Exception):
    """An exception whose str() is empty, like many raised with no arguments."""


def test_unknown_option_is_rejected_with_the_valid_names():
    with pytest.raises(PlanError, match="valid options"):
        Dataset.from_list([1]).collect(backnd="sync")
