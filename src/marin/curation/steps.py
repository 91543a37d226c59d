"""The bodies of curation steps: `run_*(config, output_path)`, called by the StepRunner via partial.

Every step reads its input shards with zephyr (one task per shard, on the configured backend),
writes one `part-NNNNN-of-NNNNN.jsonl.zst` per input shard and a `stats.json` (see docs/curation.md).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

from marin.curation.documents import (
    PIECE_BYTES,
    CurationError,
    CurationStats,
    InputShard,
    read_records,
    rejected_writer,
    report_bad,
    resolve_inputs,
    write_output,
    write_stats,
)
from marin.execution.keyed import NOT_KEY, key_fields
from zephyr import Dataset, ShardInfo, ZephyrConfig

if TYPE_CHECKING:
    from collections.abc import Iterator

logger = logging.getLogger("marin.curation")


@dataclass(frozen=True)
class DocumentStepConfig:
    """A per-document step: its inputs, the transform applied to each document, and how records are read."""

    # keyed even at their defaults: these keys were published before defaults stayed out (marin.execution.keyed)
    KEYED_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("bad_records",)

    kind: str
    inputs: tuple[str, ...]
    transform: Any  # keyed by its describe()
    bad_records: str = "fail"
    zephyr: ZephyrConfig | None = field(default=None, metadata=NOT_KEY)
    # how large an uncompressed JSONL input may be before it is read as several pieces (parallel
    # tasks, one output shard each): the documents and their order never depend on it
    piece_bytes: int = field(default=PIECE_BYTES, metadata=NOT_KEY)
    rejected: bool = False  # also write each dropped document, with its reason, under _rejected/
    allow_empty: bool = field(default=False, metadata=NOT_KEY)  # inputs that yield no document succeed

    def input_names(self) -> tuple[str, ...]:
        """Everything the step reads: its inputs and, for decontamination, the evaluation data."""
        return self.inputs + tuple(getattr(self.transform, "against", ()))

    def describe(self) -> dict:
        """The step's key fields, as its key and stats.json record them (`rejected` only when set:
        it is left out at its default, like any option added to a config)."""
        return key_fields(self)


def zephyr_config(config: ZephyrConfig | None, tasks: int) -> ZephyrConfig:
    """The step's zephyr settings (the environment's when none), run in-process for a single task."""
    zconfig = config or ZephyrConfig.from_env()
    if tasks <= 1 and zconfig.backend == "processes":
        zconfig = zconfig.with_overrides(backend="sync")  # one shard: a worker process would only add startup
    return zconfig


def run_shards(
    shard_fn, shards: list, zconfig: ZephyrConfig | None, per_shard: Sequence | None = None
) -> list:
    """`shard_fn(index, count, shard)` for every shard, on zephyr; results in shard order.

    With `per_shard`, shard i's task also gets `per_shard[i]` as a fourth argument (and only that
    one: what shard i needs travels to shard i's worker alone).
    """
    tasks = [(i, len(shards), s) for i, s in enumerate(shards)]
    if per_shard is not None:
        tasks = [(*task, extra) for task, extra in zip(tasks, per_shard, strict=True)]
    return (
        Dataset.from_list(tasks, num_shards=max(1, len(tasks)))
        .map_shard(partial(_run_tasks, shard_fn))
        .collect(config=zephyr_config(zconfig, len(tasks)))
    )


def _run_tasks(shard_fn, tasks, info: ShardInfo):
    for index, count, shard, *extra in tasks:
        yield shard_fn(index, count, shard, *extra)


def process_shard(
    transform,
    bad_records: str,
    rejected: bool,
    output_path: str,
    index: int,
    count: int,
    shard: InputShard,
) -> CurationStats:
    """Apply `transform` to each document of one shard and write the survivors as output shard `index`
    (and, with `rejected`, the dropped ones with their reasons, see `rejected_writer`)."""
    stats = CurationStats()
    with rejected_writer(output_path, index, count, rejected) as reject:
        write_output(output_path, index, count, _kept(transform, bad_records, shard, stats, reject))
    return stats


def _kept(transform, bad_records: str, shard: InputShard, stats: CurationStats, reject) -> Iterator[dict]:
    for where, line, record in read_records(shard, bad_records, stats.bad):
        text = transform.input_text(record)
        if not isinstance(text, str):
            report_bad(
                bad_records,
                stats.bad,
                where,
                line,
                f"the record has no string field for {transform.name}",
            )
            continue
        stats.read(text)
        out, reason = transform(record, text)
        if out is None:
            stats.dropped(reason, where, line, record, text)
            reject(record, reason, where, line)
            continue
        written = out.get(getattr(transform, "text_key", "text"))
        stats.wrote(written if isinstance(written, str) else "")
        yield out


def check_not_empty(documents: int, inputs: Sequence[str], allow_empty: bool) -> None:
    """An input that yields no document is a mistake (a wrong glob, field or file) unless allowed."""
    if documents or allow_empty:
        return
    shown = ", ".join(inputs[:5]) + (f" and {len(inputs) - 5} more" if len(inputs) > 5 else "")
    raise CurationError(
        f"the input yielded 0 documents: {shown}; check the paths and the text field, or pass "
        "allow_empty=True to accept an empty output"
    )


def finish(
    step: str,
    config: dict,
    results: list[CurationStats],
    output_path: str,
    extra: dict | None = None,
    *,
    inputs: Sequence[str],
    allow_empty: bool,
) -> dict:
    """Merge the shards' stats, fail on inputs that yielded nothing (unless `allow_empty`), write
    stats.json, return the summary."""
    total = CurationStats()
    for r in results:
        total.merge(r)
    check_not_empty(total.documents_in, inputs, allow_empty)
    stats = total.to_json(step, config) | (extra or {})
    write_stats(output_path, stats)
    logger.info(
        "%s: %d -> %d documents, drops %s", step, total.documents_in, total.documents_out, dict(total.drops)
    )
    summary = {k: stats[k] for k in ("documents_in", "documents_out", "drops", "bad_records")}
    return {"headline": {"metric": "documents", "value": total.documents_out}} | summary


def run_document_step(config: DocumentStepConfig, output_path: str) -> dict:
    """Run a per-document step (extract, language, quality, decontaminate) over every input shard."""
    shards = resolve_inputs(config.inputs, config.piece_bytes)
    transform = config.transform
    if hasattr(transform, "prepare"):
        transform = transform.prepare()  # e.g. decontamination reads its evaluation sets here, once
    results = run_shards(
        partial(process_shard, transform, config.bad_records, config.rejected, output_path),
        shards,
        config.zephyr,
    )
    return finish(
        config.kind,
        config.describe(),
        results,
        output_path,
        inputs=config.inputs,
        allow_empty=config.allow_empty,
    )
