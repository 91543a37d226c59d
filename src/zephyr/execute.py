"""Execute a plan: resolve the source into shards, run each stage on the backend, clean up.

Stage by stage, every shard becomes one task; a shuffle stage's run files become the next stage's
partition inputs. Spill files live in a per-job directory removed at the end, and so do the
temporary files of killed attempts in the output directory.
"""

from __future__ import annotations

import logging
import tempfile
import uuid
from dataclasses import dataclass, replace
from typing import Any

from storage import exists, join, remove_matching, remove_tree, temp_pattern
from zephyr.backends import make_backend
from zephyr.backends.base import Backend, run_stage
from zephyr.config import ZephyrConfig
from zephyr.plan import Sink, Stage, build_plan
from zephyr.progress import StageProgress
from zephyr.sources import FrameShardInput, ShardInput, Source
from zephyr.worker import ShardResult, ShardTask
from zephyr.writers import WriteSpec

logger = logging.getLogger("zephyr")


@dataclass(frozen=True)
class JobReport:
    """What a run produced: the last stage's value per shard (None where skipped) and its counts."""

    values: tuple[Any, ...]
    records_in: int
    records_out: int
    bad_records: int
    bad_examples: tuple[str, ...]
    shards_skipped: int


@dataclass(frozen=True)
class WriteResult:
    """What a writer did: every part file of the output, and how many records it wrote or skipped.

    `bad_records` counts malformed input lines dropped under bad_records='skip'; `bad_examples`
    names the first few as `file:line: reason`. `shards_skipped` counts parts that already existed
    (skip_existing=True) and were left as they were.
    """

    paths: tuple[str, ...]
    records_written: int
    bad_records: int
    bad_examples: tuple[str, ...]
    shards_skipped: int


def execute(
    source: Source, ops: tuple, sink: Sink, config: ZephyrConfig, skip_existing: bool = False
) -> JobReport:
    """Run the pipeline `source | ops | sink` to completion and report what it produced.

    With `skip_existing`, part files already there are kept, and each part written gets its counts
    beside it (`zephyr.io.read_part_stats`), so that a later resumed run can total them.
    """
    if skip_existing and isinstance(sink, WriteSpec):
        sink = replace(sink, part_stats=True)
    plan = build_plan(source, ops, sink)
    job_dir = join(config.spill_dir or tempfile.gettempdir(), f"zephyr-{uuid.uuid4().hex[:12]}")
    backend: Backend | None = None
    try:
        inputs: list[ShardInput] = source.shard_inputs(job_dir)
        counts = plan.shard_counts(len(inputs))
        wanted = _unfinished_outputs(sink, counts[-1]) if skip_existing else list(range(counts[-1]))
        if not wanted:
            return JobReport((None,) * counts[-1], 0, 0, 0, (), counts[-1])
        backend = make_backend(config, max(counts))
        totals = _Totals()
        for stage in plan.stages:
            last = stage.index == len(plan.stages) - 1
            shards = wanted if last else range(counts[stage.index])
            tasks = [_task(stage, i, counts, inputs[i], job_dir, config) for i in shards]
            progress = StageProgress(stage.index, counts[stage.index], config.quiet)
            progress.skipped(counts[stage.index] - len(tasks))
            try:
                results = run_stage(backend, tasks, config.max_retries, progress)
            finally:
                progress.close()
            totals.add(results, first_stage=stage.index == 0, last_stage=last)
            if not last:
                inputs = _partition_inputs(stage, results, counts[stage.index + 1])
        values: list[Any] = [None] * counts[-1]
        for shard, result in zip(wanted, results, strict=False):
            values[shard] = result.value
        totals.log()
        return JobReport(
            tuple(values),
            totals.records_in,
            totals.records_out,
            totals.bad_records,
            tuple(totals.bad_examples),
            counts[-1] - len(wanted),
        )
    finally:
        if backend is not None:
            backend.close()
        remove_tree(job_dir)
        if isinstance(sink, WriteSpec) and exists(sink.output_dir):
            remove_matching(temp_pattern(sink.output_dir))


def _unfinished_outputs(sink: Sink, num_shards: int) -> list[int]:
    if not isinstance(sink, WriteSpec):
        return list(range(num_shards))
    return [i for i in range(num_shards) if not exists(sink.path_for(i, num_shards))]


def _task(
    stage: Stage, shard: int, counts: list[int], shard_input: ShardInput, job_dir: str, config: ZephyrConfig
) -> ShardTask:
    output = stage.output
    is_last = stage.index == len(counts) - 1
    return ShardTask(
        stage=stage.index,
        shard=shard,
        num_shards=counts[stage.index],
        input=shard_input,
        ops=stage.ops,
        output=output,
        output_path=output.path_for(shard, counts[-1]) if isinstance(output, WriteSpec) else None,
        num_partitions=0 if is_last else counts[stage.index + 1],
        spill_dir=None if is_last else join(job_dir, f"stage-{stage.index}"),
        memory_budget_bytes=config.memory_budget_bytes,
    )


def _partition_inputs(stage: Stage, results: list[ShardResult], num_partitions: int) -> list[ShardInput]:
    """Partition p of the next stage reads every map shard's runs for p, in shard order."""
    return [
        FrameShardInput(
            tuple(path for result in results for path in result.value[p]),
            f"<stage {stage.index + 1} partition {p}>",
            stage.output,  # type: ignore[arg-type]
        )
        for p in range(num_partitions)
    ]


class _Totals:
    """Counts summed over a run's shards, and the malformed-record warning."""

    def __init__(self) -> None:
        self.records_in = self.records_out = self.bad_records = 0
        self.bad_examples: list[str] = []

    def add(self, results: list[ShardResult], first_stage: bool, last_stage: bool) -> None:
        for result in results:
            stats = result.stats
            if first_stage:
                self.records_in += stats.records_in
            if last_stage:
                self.records_out += stats.records_out
            self.bad_records += stats.bad_records
            self.bad_examples.extend(stats.bad_examples[: max(0, 5 - len(self.bad_examples))])

    def log(self) -> None:
        if self.bad_records:
            logger.warning(
                "zephyr: skipped %d malformed record(s) (bad_records='skip'); first: %s",
                self.bad_records,
                "; ".join(self.bad_examples),
            )
