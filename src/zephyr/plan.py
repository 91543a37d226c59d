"""The planner: fuse row operations into one pass per shard and cut stages only at shuffles.

A plan is a list of stages. Each stage reads its input (the source, or the partitions of the
previous stage's shuffle), runs its fused row operations in one streaming pass per shard, and
ends in a shuffle or in the pipeline's sink (a writer, collect, take or count).
"""

from __future__ import annotations

from dataclasses import dataclass

from zephyr.ops import ROW_OPS, SHUFFLE_OPS, Deduplicate, GroupBy, Reshard, RowOp, ShuffleOp
from zephyr.sources import Source
from zephyr.writers import WriteSpec


@dataclass(frozen=True)
class CollectSink:
    """Return the records to the caller (at most `limit` of them, in shard order)."""

    limit: int | None = None

    def describe(self) -> str:
        return "collect" if self.limit is None else f"take({self.limit})"


@dataclass(frozen=True)
class CountSink:
    """Return only how many records there are."""

    def describe(self) -> str:
        return "count"


Sink = WriteSpec | CollectSink | CountSink


@dataclass(frozen=True)
class Stage:
    """One streaming pass per shard: read `input`, apply the fused `ops`, end in `output`."""

    index: int
    input: Source | ShuffleOp
    ops: tuple[RowOp, ...]
    output: ShuffleOp | Sink | None


@dataclass(frozen=True)
class Plan:
    """The stages of a pipeline, in execution order."""

    stages: tuple[Stage, ...]

    def shard_counts(self, source_shards: int) -> list[int]:
        """How many shards each stage runs, given how many the source has."""
        counts = [source_shards]
        for stage in self.stages[:-1]:
            counts.append(stage.output.num_shards or counts[-1])  # type: ignore[union-attr]
        return counts

    def explain(self, source_shards: int | None = None) -> str:
        """The plan as text: per stage its input, its fused operations and where it ends."""
        counts = self.shard_counts(source_shards) if source_shards is not None else None
        lines = [f"Plan: {len(self.stages)} stage(s)"]
        for stage in self.stages:
            shards = f"{counts[stage.index]} shard(s)" if counts else "shards known at run time"
            if isinstance(stage.input, SHUFFLE_OPS):
                reading = f"read the partitions of {_shuffle_text(stage.input)}"
            else:
                reading = stage.input.describe()
            lines.append(f"Stage {stage.index} [{shards}]: {reading}")
            if stage.ops:
                lines.append("  fused: " + " -> ".join(op.describe() for op in stage.ops))
            if stage.output is None:
                lines.append("  -> (no sink yet: a writer, collect(), take() or count() runs the pipeline)")
            elif isinstance(stage.output, SHUFFLE_OPS):
                target = stage.output.num_shards or (counts[stage.index] if counts else "as many")
                lines.append(
                    f"  -> shuffle: {_shuffle_text(stage.output)} into {target} partition(s), spilled to disk"
                )
            else:
                lines.append(f"  -> {stage.output.describe()}")
        return "\n".join(lines)


def _shuffle_text(op: ShuffleOp) -> str:
    if isinstance(op, Reshard):
        return op.describe() + " (round-robin)"
    if isinstance(op, GroupBy | Deduplicate):
        return op.describe() + " (hash-partitioned sorted runs)"
    return op.describe()


def build_plan(source: Source, ops: tuple, sink: Sink | None) -> Plan:
    """Cut the op chain into stages at each shuffle, keeping row ops together for fusion."""
    stages: list[Stage] = []
    stage_input: Source | ShuffleOp = source
    row_ops: list[RowOp] = []
    for op in ops:
        if isinstance(op, ROW_OPS):
            row_ops.append(op)
        elif isinstance(op, SHUFFLE_OPS):
            stages.append(Stage(len(stages), stage_input, tuple(row_ops), op))
            stage_input, row_ops = op, []
        else:
            raise TypeError(f"not a zephyr operation: {op!r}")
    stages.append(Stage(len(stages), stage_input, tuple(row_ops), sink))
    return Plan(tuple(stages))
