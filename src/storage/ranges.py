"""Many byte ranges of many files, read in as few calls as their layout allows, the calls at once.

On an object store every ranged read is a round trip (tens of milliseconds), and its cost hardly
depends on its size below a few MiB. So the ranges of one file are sorted and any two whose gap is
at most `max_gap` bytes are merged into one read (while the merged read stays within `max_read`
bytes), and the merged reads of every file go out together through `overlapped`. Each requested
range is then a slice of its read's bytes. On local disk each range is one `pread`: there is no
round trip to save.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from storage.files import read_range
from storage.overlap import overlapped
from storage.paths import is_local

MAX_GAP = 256 << 10  # reading 256 KiB more (a few ms at object-store bandwidth) beats another round trip
MAX_READ = 16 << 20


class _Read(NamedTuple):  # not a dataclass: building one costs every import ~1 ms
    path: str
    start: int
    end: int
    members: tuple[int, ...]  # indices of the requested ranges this read covers


def coalesce(
    requests: Sequence[tuple[str, int, int]], *, max_gap: int = MAX_GAP, max_read: int = MAX_READ
) -> list[_Read]:
    """The reads that cover `requests` ((path, start, end) each): per file, sorted ranges merged
    while the gap between them is ≤ `max_gap` and the merged read ≤ `max_read` bytes."""
    by_path: dict[str, list[int]] = {}
    for i, (path, _, _) in enumerate(requests):
        by_path.setdefault(path, []).append(i)
    reads: list[_Read] = []
    for path, indices in by_path.items():
        indices.sort(key=lambda i: (requests[i][1], requests[i][2]))
        start, end, members = requests[indices[0]][1], requests[indices[0]][2], [indices[0]]
        for i in indices[1:]:
            _, s, e = requests[i]
            if s - end <= max_gap and max(end, e) - start <= max_read:
                end = max(end, e)
                members.append(i)
                continue
            reads.append(_Read(path, start, end, tuple(members)))
            start, end, members = s, e, [i]
        reads.append(_Read(path, start, end, tuple(members)))
    return reads


def read_ranges(
    requests: Sequence[tuple[str, int, int]], *, max_gap: int = MAX_GAP, max_read: int = MAX_READ
) -> list[bytes]:
    """The bytes of each (path, start, end) in `requests`, in order (fewer where a file ends first).

    Locally one `pread` each; elsewhere coalesced per file (see the module docstring) and read at once.
    FileNotFoundError when a file is missing.
    """
    if not requests:
        return []
    if all(is_local(path) for path, _, _ in requests):
        return [read_range(path, start, end) for path, start, end in requests]
    reads = coalesce(requests, max_gap=max_gap, max_read=max_read)
    datas = overlapped(lambda r: read_range(r.path, r.start, r.end), reads)
    out: list[bytes] = [b""] * len(requests)
    for read, data in zip(reads, datas, strict=True):
        view = memoryview(data)
        for i in read.members:
            _, start, end = requests[i]
            out[i] = bytes(view[start - read.start : end - read.start])
    return out
