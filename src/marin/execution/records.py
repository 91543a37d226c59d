"""The engine's record files: their typed form (`JsonRecord`), and reading them safely: only regular
files, and never more than `MAX_RECORD_BYTES`.

Every record reader (status, lease, `.executor_info`, `.artifact.json`, a moved-aside copy's record)
goes through `read_record`, so a FIFO or a device under a prefix cannot hang `marin status`, a
huge file cannot exhaust memory, and a symlink cannot make the engine read outside the prefix.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping
from typing import Any, Self, TypeVar

import msgspec
import orjson

import storage
from marin.execution.errors import UnreadableRecordError

MAX_RECORD_BYTES = 16 << 20


def read_record(path: str, limit: int = MAX_RECORD_BYTES) -> bytes | None:
    """The bytes of the record file at `path`, or None when nothing is there.

    Raises UnreadableRecordError (naming the path) when it is not a regular file (a FIFO, a device,
    a directory, a symlink) or holds more than `limit` bytes.
    """
    if storage.is_local(path):
        return _read_local(path, limit)
    try:
        # One round trip: a ranged read of at most limit + 1 bytes (no info() first). A directory is
        # no object on a bucket (not found); an fsspec store with real directories raises IsADirectoryError.
        data = storage.read_range(path, 0, limit + 1)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise UnreadableRecordError(path, "it is a directory, not a file") from None
    if len(data) > limit:
        raise UnreadableRecordError(
            path, f"it holds more than {limit} bytes, more than a record may ({limit})"
        )
    return data


def _read_local(path: str, limit: int) -> bytes | None:
    # storage.open_regular_fd's checks, inlined: this is every status read of a plan (a call and a
    # re-raise cost ~10% of a read). A record is small: the usual case is one open, one read of at
    # most _FIRST_READ bytes that comes back short, and one close. Whether the file is regular is
    # asked (fstat) only when that read does not settle it: nothing came back, or it filled the
    # buffer, or it failed. Opened with O_NONBLOCK and O_NOFOLLOW, a FIFO or a symlink never blocks
    # or redirects the read.
    try:
        fd = os.open(storage.local_path(path), storage.REGULAR_FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnreadableRecordError(
                path, "it is a symlink; records are never read through links"
            ) from None
        raise UnreadableRecordError(path, f"it cannot be opened ({e.strerror})") from None
    try:
        try:
            data = os.read(fd, min(_FIRST_READ, limit + 1))
        except OSError:  # a directory (EISDIR), a FIFO with a writer (EAGAIN)...
            data = None
        if data and len(data) < _FIRST_READ and len(data) <= limit:
            return data
        return _read_checked(fd, path, limit, data)
    finally:
        os.close(fd)


_FIRST_READ = 64 << 10  # larger than any record the engine writes


def _read_checked(fd: int, path: str, limit: int, first: bytes | None) -> bytes:
    """The rest of a record whose first read did not settle it: a regular file's whole bytes, after
    checking it is one and not too large."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise UnreadableRecordError(path, f"it is a {storage.kind_of(st.st_mode)}, not a regular file")
    if st.st_size > limit:
        raise UnreadableRecordError(path, f"it holds {st.st_size} bytes, more than a record may ({limit})")
    chunks = [first] if first else []
    total = len(first or b"")
    while chunk := os.read(fd, min(1 << 20, limit + 1 - total)):
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:  # it grew while we read
            raise UnreadableRecordError(path, f"it holds more than {limit} bytes, more than a record may")
    return b"".join(chunks)


def read_record_json(path: str, strict: bool = False) -> Any:
    """The parsed JSON record at `path`, or None when it is missing.

    An unreadable record (see `read_record`) raises UnreadableRecordError when `strict`, and reads as
    None otherwise; so does, when `strict`, an empty or garbled one.
    """
    try:
        data = read_record(path)
    except UnreadableRecordError:
        if strict:
            raise
        return None
    if data is None:
        return None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as e:
        if strict:
            what = "it is empty" if not data.strip() else f"it is not valid JSON ({e})"
            raise UnreadableRecordError(path, what) from None
        return None


class JsonRecord(msgspec.Struct, frozen=True):
    """A typed JSON record file: parsed by `from_json`, written by `to_bytes`, plain data by `to_json`."""

    @classmethod
    def from_json(cls, data: bytes | str | Mapping[str, Any], path: str) -> Self:
        """Parse the record read from `path`; UnreadableRecordError naming `path` when it is empty,
        not JSON, or JSON of another shape."""
        try:
            if isinstance(data, Mapping):
                return msgspec.convert(data, cls)
            decoder = _decoders.get(cls)
            if decoder is None:
                decoder = _decoders[cls] = msgspec.json.Decoder(cls)
            return decoder.decode(data)
        except msgspec.ValidationError as e:
            raise UnreadableRecordError(path, f"it is JSON but not a {cls.__name__} ({e})") from None
        except msgspec.DecodeError as e:
            what = "it is empty" if not data.strip() else f"it is not valid JSON ({e})"
            raise UnreadableRecordError(path, what) from None

    def to_json(self) -> dict[str, Any]:
        """The record as plain JSON data, as its file holds it (states as their strings, lists as lists)."""
        return msgspec.json.decode(_ENCODER.encode(self))

    def to_bytes(self) -> bytes:
        """The record as its file holds it: JSON indented by two spaces."""
        return msgspec.json.format(_ENCODER.encode(self), indent=2)


_decoders: dict[type, msgspec.json.Decoder] = {}
R = TypeVar("R", bound=JsonRecord)
_ENCODER = msgspec.json.Encoder()


def read_typed(path: str, kind: type[R], strict: bool = False) -> R | None:
    """The record of type `kind` at `path`, or None when it is missing.

    An unreadable record (see `read_record`; empty, garbled, or of another shape) raises
    UnreadableRecordError naming the path when `strict`, and reads as None otherwise.
    """
    try:
        data = read_record(path)
        return None if data is None else kind.from_json(data, path)
    except UnreadableRecordError:
        if strict:
            raise
        return None
