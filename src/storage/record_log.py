"""A log of JSON records that grows by appending, read back in order, never quadratic on a store.

Object stores have no append: rewriting the whole object for each record moves bytes quadratic in
the log's length. So the layout depends on where the log lives:
- local disk: the file at `path` itself (`metrics.jsonl`), one line appended per record as it
  comes, so a killed run keeps every record written before the kill;
- any other store: numbered parts beside it (`metrics-00000.jsonl`, `metrics-00001.jsonl`, ...),
  each a whole object holding the records buffered since the previous `flush()`.

`read_records` reads either layout (the parts in order, then the file), so readers never ask which.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable
from typing import Any

from storage.atomic import write_atomic
from storage.files import exists, makedirs, open_regular, read_bytes, remove, write_bytes, write_local
from storage.listing import list_names
from storage.overlap import read_many
from storage.paths import basename, is_local, join, local_path, parent

Record = dict[str, Any]


def _split(path: str) -> tuple[str, str]:
    stem, dot, ext = basename(path).rpartition(".")
    return (stem, f".{ext}") if dot else (ext, "")


def part_name(path: str, number: int) -> str:
    """The file name of part `number` of the log at `path` (`metrics.jsonl` -> `metrics-00003.jsonl`)."""
    stem, ext = _split(path)
    return f"{stem}-{number:05d}{ext}"


def _part_pattern(path: str) -> re.Pattern[str]:
    stem, ext = _split(path)
    return re.compile(rf"{re.escape(stem)}-(\d{{5,}}){re.escape(ext)}")


def part_numbers(path: str, names: Iterable[str]) -> list[tuple[int, str]]:
    """(number, name) of each part of the log at `path` among the file `names` of its directory, in order."""
    pattern = _part_pattern(path)
    return sorted((int(m.group(1)), name) for name in names if (m := pattern.fullmatch(name)))


def holds_log(path: str, names: Iterable[str]) -> bool:
    """Whether the file `names` of a directory include the log `path` names, in either layout."""
    names = list(names)
    return basename(path) in names or bool(part_numbers(path, names))


def parse_records(data: bytes) -> list[Record]:
    """The JSON objects of JSON-lines bytes; lines that do not parse (the torn last line of a killed
    writer) or are not objects are skipped."""
    records = []
    for line in data.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def _read_capped(path: str, cap: int) -> bytes:
    """At most `cap` bytes of a regular file (`NotRegularFile` for a FIFO, symlink, ...); b"" if missing."""
    try:
        with open_regular(path) as f:
            return f.read(cap)
    except (FileNotFoundError, NotADirectoryError):
        return b""


def read_log_bytes(path: str, *, max_bytes: int | None = None) -> bytes:
    """The log's bytes: its parts in order (read at once on a store), then the file at `path`; at most
    `max_bytes` of them when given. A capped read is a reader's of a prefix it did not write (the web
    UI): locally it reads regular files only, so a FIFO cannot hang it nor a symlink lead it outside
    (`NotRegularFile`)."""
    directory = parent(path)
    parts = [join(directory, name) for _, name in part_numbers(path, list_names(directory))]
    if max_bytes is not None and is_local(path):
        chunks: list[bytes] = []
        for part in [*parts, path]:
            chunks.append(_read_capped(part, max(0, max_bytes - sum(map(len, chunks)))))
        return b"".join(chunks)[:max_bytes]
    chunks = [data or b"" for data in read_many(parts)]
    if max_bytes is None:
        chunks.append(read_bytes(path) or b"")
    else:
        chunks.append(_read_capped(path, max(0, max_bytes - sum(map(len, chunks)))))
    data = b"".join(chunks)
    return data if max_bytes is None else data[:max_bytes]


def read_records(path: str, *, max_bytes: int | None = None) -> list[Record]:
    """Every record of the log at `path`, in order, in either layout (see the module docstring)."""
    return parse_records(read_log_bytes(path, max_bytes=max_bytes))


class RecordLog:
    """Appends JSON records to the log at `path`: to the file locally, in numbered parts elsewhere.

    Off local disk, records wait in memory until `flush()` (call it before a checkpoint, so that a
    resumed run finds every record up to its checkpoint) or `close()`; each flush writes one part.
    """

    def __init__(self, path: str):
        self.path = path
        self.local = is_local(path)
        self._buffer: list[bytes] = []
        self._next_part: int | None = None  # learnt from the listing at the first flush or truncate
        if self.local:
            makedirs(parent(path))

    def append(self, record: Record) -> None:
        """Add one record: written now locally, at the next flush elsewhere."""
        line = (json.dumps(record) + "\n").encode()
        if self.local:
            write_local(local_path(self.path), line, os.O_APPEND)
        else:
            self._buffer.append(line)

    def flush(self) -> None:
        """Write the buffered records as the next part (nothing when none are buffered, or locally)."""
        if not self._buffer:
            return
        number = self._part_after_last()
        write_bytes(join(parent(self.path), part_name(self.path, number)), b"".join(self._buffer))
        self._next_part = number + 1
        self._buffer = []

    def close(self) -> None:
        """Flush what is buffered."""
        self.flush()

    def read(self) -> list[Record]:
        """Every record so far, the buffered ones included."""
        return read_records(self.path) + parse_records(b"".join(self._buffer))

    def keep_only(self, keep: Callable[[Record], bool]) -> None:
        """Drop the records `keep` refuses (a resumed run drops those after its checkpoint, and writes
        them again): a part or file keeps its name and is rewritten atomically only when it changes,
        and a part left empty is removed."""
        self._buffer = [line for line in self._buffer if all(keep(r) for r in parse_records(line))]
        directory = parent(self.path)
        last = -1
        for number, name in part_numbers(self.path, list_names(directory)):
            part = join(directory, name)
            if self._rewrite(part, keep):
                last = number
            else:
                remove(part)
        self._next_part = last + 1
        if exists(self.path) and not self._rewrite(self.path, keep):
            remove(self.path)

    @staticmethod
    def _rewrite(path: str, keep: Callable[[Record], bool]) -> bool:
        """Keep the records of one file that `keep` accepts; False when none are left."""
        data = read_bytes(path) or b""
        kept = [r for r in parse_records(data) if keep(r)]
        new = "".join(json.dumps(r) + "\n" for r in kept).encode()
        if kept and new != data:  # also drops a torn last line, which a next append would join
            write_atomic(path, new)
        return bool(kept)

    def _part_after_last(self) -> int:
        if self._next_part is None:
            numbers = part_numbers(self.path, list_names(parent(self.path)))
            self._next_part = numbers[-1][0] + 1 if numbers else 0
        return self._next_part
