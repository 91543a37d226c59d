"""Shuffles that spill to disk: hash-partitioned sorted runs, merged back per partition.

The map side of `group_by`/`deduplicate` buffers encoded records up to the memory budget, sorts
the buffer by (partition, key hash, key) and writes one run file per partition; the reduce side
merges a partition's runs (each already sorted) and streams one group at a time, so neither side
ever holds a whole stage. `reshard` writes records round-robin without sorting.

A run file is a sequence of frames: `>QII` (key hash, key length, record length), key, record.
Records are pickled; keys are encoded canonically (`encode_key`) so keys Python calls equal give
equal bytes in every process.
"""

from __future__ import annotations

import heapq
import numbers
import operator
import pickle
import struct
import sys
from collections.abc import Callable, Iterator
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from itertools import chain, groupby
from operator import itemgetter
from typing import Any

import xxhash

from storage import join, open_file
from zephyr.errors import UnsupportedKeyError

_HEADER = struct.Struct(">QII")
_LENGTH = struct.Struct(">I")
# Bytes a buffered entry costs beyond its key and record: the tuple, the int, two bytes headers,
# and the sort key tuple made while sorting.
_ENTRY_OVERHEAD = 256
Frame = tuple[int, bytes, bytes]


def encode_key(key: Any) -> bytes:
    """Canonical bytes of a shuffle key: keys Python considers equal give equal bytes in every process.

    Supported keys (see docs/zephyr.md): str; bytes/bytearray; None; numbers (int, bool, float,
    Decimal, Fraction, numpy integer/float/bool scalars), compared by exact value as Python compares
    them, so `True`, `1`, `1.0`, `Decimal("1.0")` and `numpy.int64(1)` are one key and `0.5`,
    `Decimal("0.5")` and `Fraction(1, 2)` another (all NaNs are one key); datetime, date, time and
    timedelta (an aware datetime or time by its UTC instant, a naive one apart from every aware one,
    nanoseconds of pandas values kept); and tuples, lists, dicts and sets/frozensets of supported
    keys, dicts and sets regardless of order or hash seed. Any other type raises UnsupportedKeyError.
    """
    if isinstance(key, str):
        return b"s" + key.encode("utf-8", "surrogatepass")
    if isinstance(key, int):  # bool included: True == 1
        return b"i%d" % key
    if isinstance(key, float):
        return _encode_real(key)
    if key is None:
        return b"n"
    if isinstance(key, bytes | bytearray):
        return b"y" + bytes(key)
    if isinstance(key, tuple):
        return b"t" + _encode_parts(encode_key(k) for k in key)
    if isinstance(key, list):
        return b"l" + _encode_parts(encode_key(k) for k in key)
    if isinstance(key, dict):
        items = sorted((encode_key(k), encode_key(v)) for k, v in key.items())
        return b"d" + _encode_parts(part for item in items for part in item)
    if isinstance(key, set | frozenset):
        return b"S" + _encode_parts(sorted(encode_key(k) for k in key))
    if isinstance(key, datetime):  # before date: a datetime is a date, yet never equal to one
        offset = key.utcoffset()
        if offset is None:
            return b"D%d" % _nanoseconds(key - _EPOCH, getattr(key, "nanosecond", 0))
        since_epoch = _nanoseconds(key.replace(tzinfo=None) - _EPOCH, getattr(key, "nanosecond", 0))
        return b"Z%d" % (since_epoch - _nanoseconds(offset))
    if isinstance(key, date):
        return b"a%d" % key.toordinal()
    if isinstance(key, time):
        since_midnight = timedelta(
            hours=key.hour, minutes=key.minute, seconds=key.second, microseconds=key.microsecond
        )
        offset = key.utcoffset()
        if offset is None:
            return b"T%d" % _nanoseconds(since_midnight)
        return b"U%d" % (_nanoseconds(since_midnight) - _nanoseconds(offset))
    if isinstance(key, timedelta):
        return b"e%d" % _nanoseconds(key, getattr(key, "nanoseconds", 0))
    if isinstance(key, numbers.Integral):
        return b"i%d" % operator.index(key)
    if isinstance(key, numbers.Real | Decimal):
        return _encode_real(key)
    numpy = sys.modules.get("numpy")  # a numpy key means numpy is imported already
    if numpy is not None and isinstance(key, numpy.bool_):  # not a numbers.Integral, yet == 0 or 1
        return b"i%d" % bool(key)
    raise UnsupportedKeyError(type(key))


_EPOCH = datetime(1970, 1, 1)
_MICROSECOND = timedelta(microseconds=1)


def _nanoseconds(span: timedelta, extra: int = 0) -> int:
    """`span` in nanoseconds, plus `extra`: the sub-microsecond part a pandas value carries."""
    return (span // _MICROSECOND) * 1000 + extra


def _encode_real(number: Any) -> bytes:
    """A float, Decimal or other real by exact value: integral ones as the int, others as a reduced
    fraction (Python compares these types exactly, so Decimal("0.1") != 0.1 here too)."""
    exact = number if hasattr(number, "as_integer_ratio") else float(number)
    try:
        numerator, denominator = exact.as_integer_ratio()
    except (OverflowError, ValueError):  # inf, -inf or NaN: compare as the float does (all NaNs one key)
        return b"f" + repr(float(number)).encode()
    if denominator == 1:
        return b"i%d" % numerator
    return b"q%d/%d" % (numerator, denominator)


def _encode_parts(parts) -> bytes:
    return b"".join(_LENGTH.pack(len(p)) + p for p in parts)


def key_hash(key_bytes: bytes) -> int:
    """A stable 64-bit hash of encoded key bytes (Python's hash() differs between processes)."""
    return xxhash.xxh64_intdigest(key_bytes)


class SortedRunWriter:
    """Map side of a keyed shuffle: buffers records within a byte budget and spills sorted runs.

    With `keep_first`, only the first record of each key in a run is written (a combiner for
    `deduplicate`). `runs()` gives, per partition, the run files in the order they were written.
    """

    def __init__(self, directory: str, num_partitions: int, budget_bytes: int, keep_first: bool = False):
        self._dir, self._partitions = directory, num_partitions
        self._budget, self._keep_first = budget_bytes, keep_first
        self._buffer: list[tuple[int, int, bytes, bytes]] = []
        self._size = 0
        self._runs: list[list[str]] = [[] for _ in range(num_partitions)]
        self._run_count = 0

    def add(self, key: Any, record: Any) -> None:
        key_bytes = encode_key(key)
        record_bytes = pickle.dumps(record, protocol=5)
        h = key_hash(key_bytes)
        self._buffer.append((h % self._partitions, h, key_bytes, record_bytes))
        self._size += len(key_bytes) + len(record_bytes) + _ENTRY_OVERHEAD
        if self._size >= self._budget:
            self._spill()

    def _spill(self) -> None:
        if not self._buffer:
            return
        self._buffer.sort(key=itemgetter(0, 1, 2))  # stable: equal keys keep their input order
        run = self._run_count
        self._run_count += 1
        for partition, entries in groupby(self._buffer, key=itemgetter(0)):
            path = join(self._dir, f"run-{run:05d}-p{partition:05d}.bin")
            with open_file(path, "wb") as out:
                write = out.write
                last = None
                for _, h, key_bytes, record_bytes in entries:
                    if self._keep_first:
                        if (h, key_bytes) == last:
                            continue
                        last = (h, key_bytes)
                    write(_HEADER.pack(h, len(key_bytes), len(record_bytes)) + key_bytes + record_bytes)
            self._runs[partition].append(path)
        self._buffer = []
        self._size = 0

    def runs(self) -> list[list[str]]:
        """Spill what is buffered and return each partition's run files."""
        self._spill()
        return self._runs


class RoundRobinWriter:
    """Map side of `reshard`: record i of shard s goes to partition (s + i) % num_partitions, in order."""

    def __init__(self, directory: str, num_partitions: int, shard: int):
        self._paths = [join(directory, f"p{p:05d}.bin") for p in range(num_partitions)]
        self._files = [open_file(p, "wb") for p in self._paths]
        self._next = shard % num_partitions
        self._used = [False] * num_partitions

    def add(self, record: Any) -> None:
        record_bytes = pickle.dumps(record, protocol=5)
        p = self._next
        self._files[p].write(_HEADER.pack(0, 0, len(record_bytes)) + record_bytes)
        self._used[p] = True
        self._next = (p + 1) % len(self._files)

    def runs(self) -> list[list[str]]:
        """Close the files and return each partition's (single) file, or none if it got no record."""
        for f in self._files:
            f.close()
        return [[path] if used else [] for path, used in zip(self._paths, self._used, strict=False)]


def write_frames_round_robin(
    records: Iterator, directory: str, num_files: int, block: int = 1024
) -> list[str]:
    """Spread records over `num_files` frame files in blocks of `block` records; return the paths."""
    writer_paths = [join(directory, f"input-{i:05d}.bin") for i in range(num_files)]
    files = [open_file(p, "wb") for p in writer_paths]
    try:
        for i, record in enumerate(records):
            record_bytes = pickle.dumps(record, protocol=5)
            files[(i // block) % num_files].write(_HEADER.pack(0, 0, len(record_bytes)) + record_bytes)
    finally:
        for f in files:
            f.close()
    return writer_paths


def read_frames(path: str) -> Iterator[Frame]:
    """The (key hash, key bytes, record bytes) frames of one run file, streamed."""
    with open_file(path, "rb") as f:
        read, unpack, size = f.read, _HEADER.unpack, _HEADER.size
        while header := read(size):
            h, key_len, record_len = unpack(header)
            yield h, read(key_len), read(record_len)


def read_records(paths: list[str]) -> Iterator[Any]:
    """The records of frame files, file after file, in order."""
    loads = pickle.loads
    for path in paths:
        for _, _, record_bytes in read_frames(path):
            yield loads(record_bytes)


def merged_groups(paths: list[str]) -> Iterator[tuple[bytes, Iterator[Frame]]]:
    """(key bytes, frames of that key) per distinct key, merging sorted runs in order.

    Runs are given in input order (shard, then run), and the merge is stable, so within a key the
    records keep their input order.
    """
    merged = heapq.merge(*(read_frames(p) for p in paths), key=itemgetter(0, 1))
    for (_, key_bytes), frames in groupby(merged, key=itemgetter(0, 1)):
        yield key_bytes, frames


def reduce_groups(
    paths: list[str], key: Callable[[Any], Any], reducer: Callable[[Any, Iterator], Any]
) -> Iterator[Any]:
    """`reducer(key(first), records)` for each key of a partition, streaming each group's records.

    The reducer gets the key of the group's first record (in input order) as `key` returns it, not
    the canonical encoding: `1.0` stays a float, a timestamp a datetime, whatever the shard.
    """
    loads = pickle.loads
    for _, frames in merged_groups(paths):
        records = (loads(frame[2]) for frame in frames)
        first = next(records)
        yield reducer(key(first), chain((first,), records))


def first_of_groups(paths: list[str]) -> Iterator[Any]:
    """The first record of each key of a partition."""
    for _, frames in merged_groups(paths):
        yield pickle.loads(next(frames)[2])
