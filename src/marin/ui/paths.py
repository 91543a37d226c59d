"""Mapping URL paths onto the prefix, refusing anything outside it, and reading files with size caps.

Every path the UI serves is named relative to the prefix. `resolve` refuses `..` and `.` segments,
backslashes, NUL bytes and percent signs left after the URL was decoded once (a double-encoded
separator), and on local disk follows symlinks and refuses a target outside the prefix. A refusal
is `NotFound`, which the app answers with 404, the same as a missing file.
"""

from __future__ import annotations

import os
from typing import IO, TypeVar

import storage
from marin.execution.errors import UnreadableRecordError
from marin.execution.records import JsonRecord

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
    """A binary file object for `path` (local or any fsspec URL)."""
    return storage.open_file(storage.absolute(path), "rb")


def is_dir(path: str) -> bool:
    """Whether `path` is a directory."""
    return storage.is_dir(storage.absolute(path))


def size_of(path: str) -> int | None:
    """The size of the file at `path` in bytes, or None when missing."""
    return storage.size(storage.absolute(path))


def read_capped(path: str, cap: int = RECORD_CAP) -> tuple[bytes | None, bool]:
    """Up to `cap` bytes of the file at `path` and whether it was longer; (None, False) when missing."""
    try:
        with open_binary(path) as f:
            data = f.read(cap + 1)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None, False
    return data[:cap], len(data) > cap


def read_json_capped(path: str, cap: int = RECORD_CAP) -> object | None:
    """The parsed JSON file at `path`, or None when missing, unreadable or larger than `cap`."""
    import orjson

    data, truncated = read_capped(path, cap)
    if data is None or truncated:
        return None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


def read_record_capped(path: str, kind: type[R], cap: int = RECORD_CAP) -> R | None:
    """The engine record of type `kind` at `path`, or None when missing, unreadable, of another shape
    or larger than `cap`."""
    data, truncated = read_capped(path, cap)
    if data is None or truncated:
        return None
    try:
        return kind.from_json(data, path)
    except UnreadableRecordError:
        return None


def read_tail(path: str, size: int = LOG_TAIL) -> tuple[str, int]:
    """The last `size` bytes of the file at `path` as text (the first partial line dropped) and its length."""
    total = size_of(path)
    if total is None:
        return "", 0
    with open_binary(path) as f:
        start = max(0, total - size)
        f.seek(start)
        data = f.read(size)
    text = data.decode("utf-8", errors="replace")
    if start > 0 and "\n" in text:
        text = text.split("\n", 1)[1]
    return text, total
