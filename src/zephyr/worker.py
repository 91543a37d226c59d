"""One shard task: read a shard, run the fused row operations, end in a shuffle or a sink.

This is what every backend runs, in whatever process; it never raises, it returns a ShardResult
that carries either the value or a TaskFailure naming the file, line and exception.
"""

from __future__ import annotations

import time
import traceback
import uuid
from collections import deque
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import cloudpickle

from storage import join, makedirs
from zephyr.errors import BadRecordError, PlanError, UnsupportedKeyError, ZephyrError
from zephyr.ops import Deduplicate, GroupBy, Reshard, ShardInfo, ShuffleOp, apply_row_ops
from zephyr.plan import CollectSink, CountSink, Sink
from zephyr.readers import Position, ShardStats
from zephyr.shuffle import RoundRobinWriter, SortedRunWriter
from zephyr.sources import ShardInput, open_shard
from zephyr.writers import WriteSpec, write_shard


@dataclass(frozen=True)
class ShardTask:
    """Everything one shard of one stage needs, picklable to another process or a Ray worker."""

    stage: int
    shard: int
    num_shards: int
    input: ShardInput
    ops: tuple
    output: ShuffleOp | Sink
    output_path: str | None = None  # the part file, for a writer
    num_partitions: int = 0  # for a shuffle
    spill_dir: str | None = None  # for a shuffle: the stage's spill directory
    memory_budget_bytes: int = 256 * 1024 * 1024


@dataclass(frozen=True)
class TaskFailure:
    """Why a shard attempt failed: the exception and the record it was at."""

    error_type: str
    message: str
    file: str | None
    line: int | None
    traceback: str = ""
    retryable: bool = True
    expected: bool = False  # a ZephyrError: raised on purpose, its message says what is wrong


@dataclass
class ShardResult:
    """The outcome of one shard attempt: a value (path, records, count or run files) or a failure."""

    stage: int
    shard: int
    value: Any = None
    stats: ShardStats = field(default_factory=ShardStats)
    seconds: float = 0.0
    failure: TaskFailure | None = None


def run_payload(payload: bytes) -> ShardResult:
    """Unpickle a ShardTask (cloudpickle, so lambdas travel) and run it."""
    try:
        task = cloudpickle.loads(payload)
    except Exception as e:
        return ShardResult(-1, -1, failure=_failure(e, Position(), retryable=False))
    return run_task(task)


def run_task(task: ShardTask) -> ShardResult:
    """Run one shard; exceptions become a TaskFailure in the result."""
    start = time.perf_counter()
    pos, stats = Position(), ShardStats()
    info = ShardInfo(task.shard, task.num_shards, task.input.paths, task.stage)
    try:
        records = apply_row_ops(open_shard(task.input, pos, stats), task.ops, info)
        value = _consume(task, records, stats)
    except Exception as e:  # reported to the driver, which retries or fails the job
        retryable = not isinstance(e, BadRecordError | PlanError)
        return ShardResult(task.stage, task.shard, stats=stats, failure=_failure(e, pos, retryable))
    stats.records_in = pos.line
    return ShardResult(task.stage, task.shard, value, stats, time.perf_counter() - start)


def _consume(task: ShardTask, records, stats: ShardStats) -> Any:
    output = task.output
    if isinstance(output, WriteSpec):
        stats.records_out = write_shard(output, task.output_path, records, stats)
        return task.output_path
    if isinstance(output, CollectSink):
        collected = list(records if output.limit is None else islice(records, output.limit))
        stats.records_out = len(collected)
        return collected
    if isinstance(output, CountSink):
        last = deque(enumerate(records, 1), maxlen=1)
        stats.records_out = last[0][0] if last else 0
        return stats.records_out
    directory = join(task.spill_dir, f"shard-{task.shard:05d}-{uuid.uuid4().hex[:8]}")
    makedirs(directory)
    if isinstance(output, Reshard):
        writer = RoundRobinWriter(directory, task.num_partitions, task.shard)
        add = writer.add
        for record in records:
            add(record)
            stats.records_out += 1
        return writer.runs()
    if isinstance(output, GroupBy | Deduplicate):
        sorter = SortedRunWriter(
            directory,
            task.num_partitions,
            task.memory_budget_bytes,
            keep_first=isinstance(output, Deduplicate),
        )
        key = output.key
        try:
            for record in records:
                sorter.add(record if key is None else key(record), record)
                stats.records_out += 1
        except UnsupportedKeyError as e:
            raise UnsupportedKeyError(e.key_type, output.describe()) from None
        return sorter.runs()
    raise PlanError(
        f"stage {task.stage} has no sink: end the pipeline with a writer, collect(), take() or count()"
    )


def _failure(e: BaseException, pos: Position, retryable: bool) -> TaskFailure:
    if isinstance(e, BadRecordError):
        file, line = e.file, e.line
    else:
        file, line = pos.file, (pos.line or None)
    return TaskFailure(
        type(e).__name__, str(e), file, line, traceback.format_exc(), retryable, isinstance(e, ZephyrError)
    )
