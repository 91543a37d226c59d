"""The operations of a pipeline as small frozen value objects, and how row operations stream.

Row operations (map, filter, flat_map, map_shard, window) run inside one pass over a shard and are
fused; shuffles (reshard, group_by, deduplicate) move records between shards and end a stage.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, islice
from typing import Any


def name_of(fn: Callable) -> str:
    """A short human name for a user function, for plans and error messages."""
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


@dataclass(frozen=True)
class ShardInfo:
    """What `map_shard` functions learn about their shard: index, count and the source file(s)."""

    index: int
    count: int
    paths: tuple[str, ...] = ()
    stage: int = 0


@dataclass(frozen=True)
class Map:
    """`fn(record) -> record`."""

    fn: Callable[[Any], Any]

    def describe(self) -> str:
        return f"map({name_of(self.fn)})"

    def apply(self, records: Iterator, shard: ShardInfo) -> Iterator:
        return map(self.fn, records)


@dataclass(frozen=True)
class Filter:
    """Keep the records for which `fn(record)` is true."""

    fn: Callable[[Any], bool]

    def describe(self) -> str:
        return f"filter({name_of(self.fn)})"

    def apply(self, records: Iterator, shard: ShardInfo) -> Iterator:
        return filter(self.fn, records)


@dataclass(frozen=True)
class FlatMap:
    """`fn(record) -> iterable of records`, concatenated."""

    fn: Callable[[Any], Iterable]

    def describe(self) -> str:
        return f"flat_map({name_of(self.fn)})"

    def apply(self, records: Iterator, shard: ShardInfo) -> Iterator:
        return chain.from_iterable(map(self.fn, records))


@dataclass(frozen=True)
class MapShard:
    """`fn(records_iterator, shard_info) -> iterable of records`: a whole shard at once, streamed."""

    fn: Callable[[Iterator, ShardInfo], Iterable]

    def describe(self) -> str:
        return f"map_shard({name_of(self.fn)})"

    def apply(self, records: Iterator, shard: ShardInfo) -> Iterator:
        return iter(self.fn(records, shard))


@dataclass(frozen=True)
class Window:
    """Consecutive records of a shard in lists of `size` (the last may be shorter)."""

    size: int

    def describe(self) -> str:
        return f"window({self.size})"

    def apply(self, records: Iterator, shard: ShardInfo) -> Iterator[list]:
        size = self.size
        return iter(lambda: list(islice(records, size)), [])


@dataclass(frozen=True)
class Reshard:
    """Redistribute records round-robin into `num_shards` shards (a shuffle)."""

    num_shards: int

    def describe(self) -> str:
        return f"reshard({self.num_shards})"


@dataclass(frozen=True)
class GroupBy:
    """`reducer(key, records_iterator) -> record` once per distinct `key(record)` (a shuffle)."""

    key: Callable[[Any], Any]
    reducer: Callable[[Any, Iterator], Any]
    num_shards: int | None = None

    def describe(self) -> str:
        return f"group_by(key={name_of(self.key)}, reducer={name_of(self.reducer)})"


@dataclass(frozen=True)
class Deduplicate:
    """Keep the first record (in input order) of each distinct `key(record)`; the record itself when no key."""

    key: Callable[[Any], Any] | None = None
    num_shards: int | None = None

    def describe(self) -> str:
        return f"deduplicate(key={name_of(self.key) if self.key else 'record'})"


RowOp = Map | Filter | FlatMap | MapShard | Window
ShuffleOp = Reshard | GroupBy | Deduplicate
ROW_OPS = (Map, Filter, FlatMap, MapShard, Window)
SHUFFLE_OPS = (Reshard, GroupBy, Deduplicate)


def apply_row_ops(records: Iterator, ops: tuple[RowOp, ...], shard: ShardInfo) -> Iterator:
    """The fused pass: each op wraps the previous iterator; map and filter stay in C (builtins)."""
    for op in ops:
        records = op.apply(records, shard)
    return records
