"""Where a pipeline's records come from, and the per-shard inputs a stage's tasks read.

A source is declared lazily and split into shard inputs only when the pipeline executes: one
shard per input file, contiguous slices of a list, or blocks of an iterable spread over files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from storage import NoFilesMatch, list_files, makedirs
from zephyr.errors import PlanError
from zephyr.ops import GroupBy, Reshard, ShuffleOp
from zephyr.readers import BAD_RECORD_POLICIES, Position, ShardStats, infer_format, read_file
from zephyr.shuffle import first_of_groups, read_records, reduce_groups, write_frames_round_robin


@dataclass(frozen=True)
class FileShardInput:
    """One input file."""

    path: str
    format: str
    bad_records: str

    @property
    def paths(self) -> tuple[str, ...]:
        return (self.path,)


@dataclass(frozen=True)
class ListShardInput:
    """A slice of an in-memory list."""

    items: tuple
    label: str

    @property
    def paths(self) -> tuple[str, ...]:
        return ()


@dataclass(frozen=True)
class FrameShardInput:
    """Spilled frame files: a materialised iterable, or one partition of a shuffle to reduce."""

    files: tuple[str, ...]
    label: str
    shuffle: ShuffleOp | None = None

    @property
    def paths(self) -> tuple[str, ...]:
        return ()


ShardInput = FileShardInput | ListShardInput | FrameShardInput


def open_shard(shard: ShardInput, pos: Position, stats: ShardStats) -> Iterator[Any]:
    """The records of one shard input, in order; `pos` names the record last read."""
    if isinstance(shard, FileShardInput):
        return read_file(shard.path, shard.format, shard.bad_records, pos, stats)
    pos.file = shard.label
    if isinstance(shard, ListShardInput):
        records: Iterator = iter(shard.items)
    elif shard.shuffle is None or isinstance(shard.shuffle, Reshard):
        records = read_records(list(shard.files))
    elif isinstance(shard.shuffle, GroupBy):
        records = reduce_groups(list(shard.files), shard.shuffle.key, shard.shuffle.reducer)
    else:
        records = first_of_groups(list(shard.files))
    return _numbered(records, pos)


def _numbered(records: Iterator, pos: Position) -> Iterator:
    for pos.line, record in enumerate(records, 1):  # noqa: B007 - the position is the point
        yield record


@dataclass(frozen=True)
class FileSource:
    """Files matching glob pattern(s), one shard per file, in sorted path order."""

    patterns: tuple[str, ...]
    format: str | None = None
    bad_records: str = "fail"

    def __post_init__(self) -> None:
        if self.bad_records not in BAD_RECORD_POLICIES:
            raise PlanError(f"bad_records must be one of {BAD_RECORD_POLICIES}, got {self.bad_records!r}")

    def shard_inputs(self, work_dir: str) -> list[ShardInput]:
        files = _input_files(self.patterns)
        return [FileShardInput(f, self.format or infer_format(f), self.bad_records) for f in files]

    def shard_count(self) -> int:
        return len(_input_files(self.patterns))

    def describe(self) -> str:
        fmt = self.format or "format by extension"
        return (
            f"read files {list(self.patterns)} ({fmt}, bad_records={self.bad_records!r}), one shard per file"
        )


@dataclass(frozen=True)
class ListSource:
    """An in-memory list split into `num_shards` contiguous slices."""

    items: tuple
    num_shards: int = 1

    def __post_init__(self) -> None:
        if self.num_shards < 1:
            raise PlanError(f"num_shards must be at least 1, got {self.num_shards}")

    def shard_inputs(self, work_dir: str) -> list[ShardInput]:
        n, k = len(self.items), self.num_shards
        bounds = [n * i // k for i in range(k + 1)]
        return [ListShardInput(self.items[bounds[i] : bounds[i + 1]], f"<list shard {i}>") for i in range(k)]

    def shard_count(self) -> int:
        return self.num_shards

    def describe(self) -> str:
        return f"from_list({len(self.items)} records) in {self.num_shards} shard(s)"


@dataclass(frozen=True, eq=False)
class IterableSource:
    """An iterable, consumed once at execution and spread over `num_shards` spill files in blocks."""

    iterable: Iterable | Callable[[], Iterable]
    num_shards: int = 1

    def __post_init__(self) -> None:
        if self.num_shards < 1:
            raise PlanError(f"num_shards must be at least 1, got {self.num_shards}")

    def shard_inputs(self, work_dir: str) -> list[ShardInput]:
        directory = work_dir + "/source"
        makedirs(directory)
        records = self.iterable() if callable(self.iterable) else self.iterable
        files = write_frames_round_robin(iter(records), directory, self.num_shards)
        return [FrameShardInput((f,), f"<iterable shard {i}>") for i, f in enumerate(files)]

    def shard_count(self) -> int:
        return self.num_shards

    def describe(self) -> str:
        return f"from_iterable(...) in {self.num_shards} shard(s)"


Source = FileSource | ListSource | IterableSource


def file_source(patterns: str | Sequence[str], format: str | None, bad_records: str) -> FileSource:
    """A FileSource from one glob or several."""
    return FileSource((patterns,) if isinstance(patterns, str) else tuple(patterns), format, bad_records)


def _input_files(patterns: Sequence[str]) -> list[str]:
    """The files the patterns match; a PlanError (a wrongly declared pipeline) when none do."""
    try:
        return list_files(patterns)
    except NoFilesMatch as e:
        raise PlanError(str(e)) from None
