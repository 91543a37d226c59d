"""Byte streams: reading with decompression by extension, and files that appear whole or not at all.

Compression is inferred from the extension: `.gz` (gzip, written with mtime 0 so the bytes are
reproducible) and `.zst` (zstandard).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import BinaryIO

from storage.files import makedirs, open_file, remove
from storage.paths import fs_and_path, is_local, join, local_path

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


@contextlib.contextmanager
def open_read(path: str) -> Iterator[BinaryIO]:
    """A binary stream of the file's decompressed bytes."""
    with open_file(path, "rb") as raw:
        compression = compression_of(path)
        if compression == "gzip":
            import gzip

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
def _compressing(raw: BinaryIO, path: str) -> Iterator[BinaryIO]:
    compression = compression_of(path)
    if compression == "gzip":
        import gzip

        with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0, filename="") as stream:
            yield stream
    elif compression == "zstd":
        import zstandard

        with zstandard.ZstdCompressor(level=3).stream_writer(raw, closefd=False) as stream:
            yield stream
    else:
        yield raw


@contextlib.contextmanager
def open_write(path: str) -> Iterator[BinaryIO]:
    """A binary stream that becomes the file at `path` only when the block ends without error.

    Bytes go to a hidden temporary name in the same directory, compressed by the final name's
    extension, and are renamed into place at the end, so no reader ever sees half a file.
    """
    directory, _, name = path.rstrip("/").rpartition("/")
    directory = directory or "."
    makedirs(directory)
    temp = join(directory, f".{name}.tmp-{os.urandom(6).hex()}")
    try:
        with open_file(temp, "wb") as raw, _compressing(raw, path) as stream:
            yield stream
        if is_local(path):
            os.replace(local_path(temp), local_path(path))
        else:
            fs, final = fs_and_path(path)
            fs.mv(fs_and_path(temp)[1], final)
    except BaseException:
        with contextlib.suppress(Exception):
            remove(temp)
        raise


def temp_pattern(directory: str) -> str:
    """The glob of temporary files `open_write` leaves behind in a directory when a process dies."""
    return join(directory, ".part-*.tmp-*")


# Blocks stay under glibc malloc's mmap threshold (128 KiB): a larger bytes object is a fresh
# mapping each time, whose pages the kernel faults in and zeroes on first touch, one fault per
# 4 KiB read (45,000 faults in a 1M-record zephyr pass, 560 at 64 KiB); smaller ones reuse heap memory.
READ_CHUNK_BYTES = 64 << 10


def read_chunks(stream: BinaryIO, size: int = READ_CHUNK_BYTES) -> Iterator[bytes]:
    """Blocks of up to `size` bytes until the stream ends."""
    read = stream.read
    while True:
        block = read(size)
        if not block:
            return
        yield block
