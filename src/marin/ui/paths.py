"""Mapping URL paths onto the prefix, refusing anything outside it, and reading files safely.

Every path the UI serves is named relative to the prefix. `resolve` refuses `..` and `.` segments,
backslashes, NUL bytes and percent signs left after the URL was decoded once (a double-encoded
separator), and on local disk follows symlinks and refuses a target outside the prefix. A refusal
is `NotFound`, which the app answers with 404, the same as a missing file.

Records are read by the engine's own reader (`marin.execution.records.read_record`): regular files
only, never through a symlink, never blocking on a FIFO, and capped in size. Other files (logs,
data shards) are opened with `storage.open_regular`, which refuses the same things.
"""

from __future__ import annotations

import os
from typing import IO, TypeVar

import storage
from marin.execution.errors import UnreadableRecordError
from marin.execution.records import JsonRecord, read_record

R = TypeVar("R", bound=JsonRecord)

RECORD_CAP = 4 << 20  # bytes of one JSON record the UI parses
LOG_TAIL = 64 << 10  # bytes of a log the output page shows


class NotFound(Exception):
    """The path is outside the prefix, malformed, or missing: the app answers 404."""


def resolve(prefix: str, rel: str) -> str:
    """The absolute path of `rel` under `prefix`; NotFound when it would leave the prefix or is missing."""
    rel = rel.strip("/")
    if any(bad in rel for bad in ("\\", "\x00", "%")):
        raise NotFound(rel)
    parts = [p for p in rel.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise NotFound(rel)
    path = storage.join(prefix, *parts) if parts else prefix
    if storage.is_local(prefix):
        root = os.path.realpath(prefix)
        real = os.path.realpath(path)
        if real != root and not real.startswith(root + os.sep):
            raise NotFound(rel)
        if not os.path.exists(real):
            raise NotFound(rel)
    elif not storage.exists(path):
        raise NotFound(rel)
    return path


def relative(prefix: str, path: str) -> str | None:
    """`path` relative to `prefix`, or None when it is not under it."""
    if path == prefix:
        return ""
    return path[len(prefix) + 1 :] if path.startswith(prefix.rstrip("/") + "/") else None


def open_binary(path: str) -> IO[bytes]:
    """A binary reader of the regular file at `path` (local or any fsspec URL).

    Locally it never follows a symlink in the last component and never blocks on a FIFO:
    `storage.NotRegularFile` says what is there instead.
    """
    return storage.open_regular(storage.absolute(path))


def is_dir(path: str) -> bool:
    """Whether `path` is a directory."""
    return storage.is_dir(storage.absolute(path))


def size_of(path: str) -> int | None:
    """The size of the file at `path` in bytes, or None when missing."""
    return storage.size(storage.absolute(path))


def read_capped(path: str, cap: int = RECORD_CAP) -> bytes | None:
    """The bytes of the record file at `path`, or None when missing, read as the engine reads records.

    UnreadableRecordError (naming the path and why) when it is not a regular file (a FIFO, a device,
    a symlink, which could point out of the prefix) or holds more than `cap` bytes.
    """
    return read_record(storage.absolute(path), cap)


def read_json_capped(path: str, cap: int = RECORD_CAP) -> object | None:
    """The parsed JSON file at `path`, or None when missing, unreadable (see `read_capped`), not JSON
    or larger than `cap`."""
    import orjson

    try:
        data = read_capped(path, cap)
    except UnreadableRecordError:
        return None
    if data is None:
        return None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


def read_record_checked(path: str, kind: type[R], cap: int = RECORD_CAP) -> tuple[R | None, str | None]:
    """The engine record of type `kind` at `path` (None when missing or unreadable), and why it could
    not be read (None when it was, or is missing): not a regular file, larger than `cap`, or not
    JSON of that shape."""
    try:
        data = read_capped(path, cap)
        return (None if data is None else kind.from_json(data, path)), None
    except UnreadableRecordError as e:
        return None, e.why


def read_record_capped(path: str, kind: type[R], cap: int = RECORD_CAP) -> R | None:
    """The engine record of type `kind` at `path`, or None when missing or unreadable (see
    `read_record_checked`)."""
    return read_record_checked(path, kind, cap)[0]


def read_tail(path: str, size: int = LOG_TAIL) -> tuple[str, int]:
    """The last `size` bytes of the file at `path` as text (the first partial line dropped) and its
    length; ("", 0) when missing. `storage.NotRegularFile` when it is a FIFO, device or symlink."""
    try:
        with open_binary(path) as f:
            total = f.seek(0, os.SEEK_END)
            start = max(0, total - size)
            f.seek(start)
            data = f.read(size)
    except (FileNotFoundError, NotADirectoryError):
        return "", 0
    text = data.decode("utf-8", errors="replace")
    if start > 0 and "\n" in text:
        text = text.split("\n", 1)[1]
    return text, total
