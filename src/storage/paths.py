"""Paths as URLs: joining and splitting them, telling local from remote, and the fsspec client of a URL.

Paths without a protocol (or with `file://`) are local disk, handled with plain `os` calls by the
rest of the package; any other URL goes through the fsspec filesystem of its protocol, imported only
when a remote path is first used (importing fsspec costs about 60 ms that a local run never pays).
"""

from __future__ import annotations

import os
import threading
from typing import Any

_LOCAL_PREFIX = "file://"
_fs_cache: dict[str, Any] = {}
_fs_lock = threading.Lock()

# Stores whose own precondition makes `pipe_file(..., mode="create")` one conditional PUT that the
# server refuses when the object exists (gcsfs: `ifGenerationMatch=0`; s3fs: `If-None-Match: *`,
# which AWS S3 honours since 2024-08). fsspec's default "create" is check-then-write: never used.
CONDITIONAL_CREATE = {
    "gs": "ifGenerationMatch=0",
    "gcs": "ifGenerationMatch=0",
    "s3": "If-None-Match: *",
    "s3a": "If-None-Match: *",
}


def is_local(path: str) -> bool:
    """True for plain filesystem paths and `file://` URLs."""
    return "://" not in path or path.startswith(_LOCAL_PREFIX)


def local_path(path: str) -> str:
    """A local path or `file://` URL as the operating system spells it."""
    return path[len(_LOCAL_PREFIX) :] if path.startswith(_LOCAL_PREFIX) else path


def protocol_of(path: str) -> str:
    """The URL's protocol ("s3", "gs", ...), or "file" for a local path."""
    return path.split("://", 1)[0] if "://" in path else "file"


def fs_and_path(path: str) -> tuple[Any, str]:
    """The fsspec filesystem for `path` and the path as that filesystem spells it.

    One client per protocol for the life of the process (creating one costs a credentials lookup).
    """
    protocol = protocol_of(path)
    with _fs_lock:
        fs = _fs_cache.get(protocol)
    if fs is None:
        import fsspec.core

        # Object stores' listing caches never expire: another process's lease or status would stay unseen.
        options = {"use_listings_cache": False} if protocol in CONDITIONAL_CREATE else {}
        fs, _ = fsspec.core.url_to_fs(path, **options)
        with _fs_lock:
            _fs_cache[protocol] = fs
    return fs, fs._strip_protocol(path)


def forget_clients() -> None:
    """Drop the cached fsspec clients, and fsspec's own instance cache of their kinds: fsspec keys
    instances by their arguments, not the environment, so a client made for a stopped server (a test
    starting another on another port) would otherwise be reused."""
    with _fs_lock:
        clients = list(_fs_cache.values())
        _fs_cache.clear()
    for fs in clients:
        type(fs).clear_instance_cache()


def join(base: str, *parts: str) -> str:
    """Join path segments with '/', whatever the store."""
    out = base.rstrip("/")
    for part in parts:
        out = f"{out}/{part.strip('/')}"
    return out


def parent(path: str) -> str:
    """The directory holding `path`."""
    return path.rstrip("/").rsplit("/", 1)[0]


def basename(path: str) -> str:
    """The last segment of `path`."""
    return path.rstrip("/").rsplit("/", 1)[-1]


def absolute(path: str) -> str:
    """A local path made absolute (and `~` expanded); URLs are returned unchanged."""
    if is_local(path):
        return os.path.abspath(os.path.expanduser(local_path(path)))
    return path.rstrip("/")


def display(fs: Any, path: str) -> str:
    """A path an fsspec call returned, as the user would write it: plain locally, a URL otherwise."""
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return path if protocol in ("file", "local") else fs.unstrip_protocol(path)
