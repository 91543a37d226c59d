"""Paths and byte streams over fsspec: globbing, compression by extension, atomic writes.

Every path is a URL (local paths are plain paths). Compression is inferred from the extension:
`.gz` (gzip, written with mtime 0 so the bytes are reproducible) and `.zst` (zstandard).
"""

from __future__ import annotations

import contextlib
import gzip
import uuid
from collections.abc import Iterator, Sequence
from typing import BinaryIO

import fsspec

from zephyr.errors import PlanError

COMPRESSIONS = {".gz": "gzip", ".zst": "zstd"}


def compression_of(path: str) -> str | None:
    """'gzip', 'zstd' or None, from the path's last extension."""
    for ext, name in COMPRESSIONS.items():
        if path.endswith(ext):
            return name
    return None


def strip_compression(path: str) -> str:
    """The path without a trailing compression extension."""
    for ext in COMPRESSIONS:
        if path.endswith(ext):
            return path[: -len(ext)]
    return path


def _display(fs: fsspec.AbstractFileSystem, path: str) -> str:
    """A path as the user would write it: plain for local files, a URL otherwise."""
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return path if protocol in ("file", "local") else fs.unstrip_protocol(path)


def list_files(patterns: str | Sequence[str]) -> list[str]:
    """The sorted, de-duplicated files that the glob pattern(s) match; an error if none match."""
    if isinstance(patterns, str):
        patterns = [patterns]
    found: set[str] = set()
    for pattern in patterns:
        fs, path = fsspec.core.url_to_fs(pattern)
        matches = fs.glob(path) if any(c in path for c in "*?[") else ([path] if fs.exists(path) else [])
        found.update(_display(fs, m) for m in matches if not fs.isdir(m))
    if not found:
        raise PlanError(f"no input files match {list(patterns)}; check the path or glob pattern")
    return sorted(found)


def join(base: str, name: str) -> str:
    """`base/name` for a URL or a local path."""
    return base.rstrip("/") + "/" + name


def exists(path: str) -> bool:
    """Whether a file exists at the path."""
    fs, p = fsspec.core.url_to_fs(path)
    return fs.exists(p)


def makedirs(path: str) -> None:
    """Create a directory and its parents (a no-op on object stores)."""
    fs, p = fsspec.core.url_to_fs(path)
    fs.makedirs(p, exist_ok=True)


def remove_tree(path: str) -> None:
    """Delete a directory and everything under it, if it exists."""
    fs, p = fsspec.core.url_to_fs(path)
    if fs.exists(p):
        fs.rm(p, recursive=True)


def remove_matching(pattern: str) -> None:
    """Delete every file the glob matches (left-over temporary files of killed attempts)."""
    fs, p = fsspec.core.url_to_fs(pattern)
    for match in fs.glob(p):
        fs.rm(match)


@contextlib.contextmanager
def open_read(path: str) -> Iterator[BinaryIO]:
    """A binary stream of the file's decompressed bytes."""
    with fsspec.open(path, "rb") as raw:
        compression = compression_of(path)
        if compression == "gzip":
            with gzip.GzipFile(fileobj=raw, mode="rb") as stream:
                yield stream
        elif compression == "zstd":
            import zstandard

            with zstandard.ZstdDecompressor().stream_reader(
                raw, read_across_frames=True, closefd=False
            ) as stream:
                yield stream
        else:
            yield raw


@contextlib.contextmanager
def atomic_write(path: str) -> Iterator[BinaryIO]:
    """A binary stream that becomes the file at `path` only when the block ends without error.

    Bytes go to a hidden temporary name in the same directory, compressed by the final name's
    extension, and are renamed into place at the end, so no reader ever sees half a file.
    """
    fs, final = fsspec.core.url_to_fs(path)
    parent, _, name = final.rpartition("/")
    fs.makedirs(parent, exist_ok=True)
    temp = f"{parent}/.{name}.tmp-{uuid.uuid4().hex[:12]}"
    try:
        with fs.open(temp, "wb") as raw:
            compression = compression_of(path)
            if compression == "gzip":
                with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0, filename="") as stream:
                    yield stream
            elif compression == "zstd":
                import zstandard

                with zstandard.ZstdCompressor(level=3).stream_writer(raw, closefd=False) as stream:
                    yield stream
            else:
                yield raw
        fs.mv(temp, final)
    except BaseException:
        with contextlib.suppress(Exception):
            fs.rm(temp)
        raise


def temp_pattern(directory: str) -> str:
    """The glob of temporary files `atomic_write` leaves behind in a directory when a process dies."""
    return join(directory, ".part-*.tmp-*")


def read_chunks(stream: BinaryIO, size: int = 1 << 20) -> Iterator[bytes]:
    """Blocks of up to `size` bytes until the stream ends."""
    read = stream.read
    while True:
        block = read(size)
        if not block:
            return
        yield block
