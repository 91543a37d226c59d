"""Dataset: a lazy, sharded pipeline. Building one runs nothing; a writer, collect, take or count runs it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from zephyr.config import ZephyrConfig, resolve_config
from zephyr.errors import PlanError
from zephyr.execute import WriteResult, execute
from zephyr.ops import Deduplicate, Filter, FlatMap, GroupBy, Map, MapShard, Reshard, ShardInfo, Window
from zephyr.plan import CollectSink, CountSink, Plan, Sink, build_plan
from zephyr.sources import IterableSource, ListSource, Source, file_source
from zephyr.writers import WriteSpec


@dataclass(frozen=True)
class Dataset:
    """A source and a chain of operations, each a small frozen value; every method returns a new Dataset.

    Execution options (backend, workers, retries, memory budget, quiet) go to the method that runs
    the pipeline, as `config=ZephyrConfig(...)` and/or keyword overrides such as `backend="sync"`.
    """

    source: Source
    ops: tuple = ()

    # -- constructors -------------------------------------------------------------------------
    @staticmethod
    def from_files(
        patterns: str | Sequence[str], *, format: str | None = None, bad_records: str = "fail"
    ) -> Dataset:
        """One shard per file matching the glob(s), in sorted order; format from the extension unless given.

        `bad_records="skip"` drops malformed lines (invalid JSON, invalid UTF-8) and counts them;
        the default "fail" stops with an error naming the file and line.
        """
        return Dataset(file_source(patterns, format, bad_records))

    @staticmethod
    def from_list(items: Sequence, num_shards: int = 1) -> Dataset:
        """An in-memory list in `num_shards` contiguous shards."""
        return Dataset(ListSource(tuple(items), num_shards))

    @staticmethod
    def from_iterable(iterable: Iterable | Callable[[], Iterable], num_shards: int = 1) -> Dataset:
        """An iterable (or a function returning one), consumed once when the pipeline runs.

        Its records are streamed to spill files in blocks spread over `num_shards` shards, so it
        may be larger than memory; with one shard the order is kept.
        """
        return Dataset(IterableSource(iterable, num_shards))

    # -- row operations (fused into one pass per shard) ----------------------------------------
    def map(self, fn: Callable[[Any], Any]) -> Dataset:
        """`fn(record) -> record`."""
        return self._then(Map(fn))

    def filter(self, fn: Callable[[Any], bool]) -> Dataset:
        """Keep the records for which `fn(record)` is true."""
        return self._then(Filter(fn))

    def flat_map(self, fn: Callable[[Any], Iterable]) -> Dataset:
        """`fn(record) -> iterable of records`, flattened."""
        return self._then(FlatMap(fn))

    def map_shard(self, fn: Callable[[Iterator, ShardInfo], Iterable]) -> Dataset:
        """`fn(records_iterator, shard_info)` yields a shard's output; for work with per-shard state or files."""
        return self._then(MapShard(fn))

    def window(self, size: int) -> Dataset:
        """Consecutive records of each shard in lists of `size`."""
        if size < 1:
            raise PlanError(f"window size must be at least 1, got {size}")
        return self._then(Window(size))

    # -- shuffles (each ends a stage) -------------------------------------------------------------
    def reshard(self, num_shards: int) -> Dataset:
        """Redistribute the records round-robin into `num_shards` shards."""
        if num_shards < 1:
            raise PlanError(f"reshard needs at least 1 shard, got {num_shards}")
        return self._then(Reshard(num_shards))

    def group_by(
        self,
        key: Callable[[Any], Any],
        reducer: Callable[[Any, Iterator], Any],
        num_shards: int | None = None,
    ) -> Dataset:
        """`reducer(key, records)` once per distinct `key(record)`; records of a key arrive in input order.

        Keys are grouped as Python's `==` compares them (`1`, `1.0`, `True`, `Decimal("1")` and
        `numpy.int64(1)` are one key): str, bytes, None, numbers (int, bool, float, Decimal,
        Fraction, numpy scalars), datetime/date/time/timedelta, and tuples, lists, dicts and sets
        of those; any other type fails with UnsupportedKeyError. The reducer gets the key of the
        group's first record in input order. Spills to disk beyond the memory budget.
        """
        return self._then(GroupBy(key, reducer, _check_shards(num_shards)))

    def deduplicate(self, key: Callable[[Any], Any] | None = None, num_shards: int | None = None) -> Dataset:
        """Keep the first record (in input order) of each distinct key; the record itself is the key if none."""
        return self._then(Deduplicate(key, _check_shards(num_shards)))

    # -- running -------------------------------------------------------------------------------
    def collect(self, config: ZephyrConfig | None = None, **options: Any) -> list:
        """All records, in shard order. For small results: they all come back to this process."""
        report = execute(self.source, self.ops, CollectSink(), resolve_config(config, options))
        return [record for shard in report.values for record in shard]

    def take(self, n: int, config: ZephyrConfig | None = None, **options: Any) -> list:
        """The first `n` records in shard order (each shard stops reading after `n`)."""
        report = execute(self.source, self.ops, CollectSink(limit=n), resolve_config(config, options))
        return [record for shard in report.values for record in shard][:n]

    def count(self, config: ZephyrConfig | None = None, **options: Any) -> int:
        """How many records the pipeline yields."""
        report = execute(self.source, self.ops, CountSink(), resolve_config(config, options))
        return sum(report.values)

    def write_jsonl(
        self,
        output_dir: str,
        *,
        compression: str | None = None,
        skip_existing: bool = False,
        config: ZephyrConfig | None = None,
        **options: Any,
    ) -> WriteResult:
        """Write `output_dir/part-00000-of-0000N.jsonl[.gz|.zst]`, one file per shard of the last stage."""
        return self._write(WriteSpec("jsonl", output_dir, compression), skip_existing, config, options)

    def write_text(
        self,
        output_dir: str,
        *,
        compression: str | None = None,
        skip_existing: bool = False,
        config: ZephyrConfig | None = None,
        **options: Any,
    ) -> WriteResult:
        """Write str records as lines to `output_dir/part-00000-of-0000N.txt[.gz|.zst]`."""
        return self._write(WriteSpec("text", output_dir, compression), skip_existing, config, options)

    def write_parquet(
        self,
        output_dir: str,
        *,
        row_group_size: int = 65536,
        skip_existing: bool = False,
        config: ZephyrConfig | None = None,
        **options: Any,
    ) -> WriteResult:
        """Write dict records to `output_dir/part-00000-of-0000N.parquet` in row groups of `row_group_size`."""
        return self._write(
            WriteSpec("parquet", output_dir, None, row_group_size), skip_existing, config, options
        )

    def plan(self, sink: Sink | None = None) -> Plan:
        """The stages this pipeline runs: row operations fused, cut at each shuffle."""
        return build_plan(self.source, self.ops, sink)

    def explain(self) -> str:
        """Print the plan and return it as text."""
        try:
            source_shards: int | None = self.source.shard_count()
        except PlanError:  # no file matches yet; the plan is still worth showing
            source_shards = None
        text = self.plan().explain(source_shards)
        print(text)
        return text

    def _then(self, op: Any) -> Dataset:
        return Dataset(self.source, self.ops + (op,))

    def _write(
        self, spec: WriteSpec, skip_existing: bool, config: ZephyrConfig | None, options: dict
    ) -> WriteResult:
        report = execute(
            self.source, self.ops, spec, resolve_config(config, options), skip_existing=skip_existing
        )
        num_shards = len(report.values)
        return WriteResult(
            paths=tuple(spec.path_for(i, num_shards) for i in range(num_shards)),
            records_written=report.records_out,
            bad_records=report.bad_records,
            bad_examples=report.bad_examples,
            shards_skipped=report.shards_skipped,
        )


def _check_shards(num_shards: int | None) -> int | None:
    if num_shards is not None and num_shards < 1:
        raise PlanError(f"num_shards must be at least 1, got {num_shards}")
    return num_shards
