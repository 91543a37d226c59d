"""Storage helpers: every path is a URL handled through fsspec, with a fast path for local disk.

fsspec costs tens of microseconds per call; a cached DAG of 10,000 steps must plan in well under a
second, so paths without a protocol (or with `file://`) use plain `os` calls. Everything else goes
through `fsspec.core.url_to_fs`, imported only when a remote path is first used.

Writes that readers may race with are atomic: a temporary name then a rename locally, a single-object
put on object stores. No fsync: records survive a killed process, not a power cut.
"""

from __future__ import annotations

import errno
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from typing import Any

_LOCAL_PREFIX = "file://"
_fs_cache: dict[str, tuple[Any, str]] = {}
_fs_lock = threading.Lock()


def is_local(path: str) -> bool:
    """True for plain filesystem paths and `file://` URLs."""
    return "://" not in path or path.startswith(_LOCAL_PREFIX)


def _local(path: str) -> str:
    return path[len(_LOCAL_PREFIX) :] if path.startswith(_LOCAL_PREFIX) else path


def fs_and_path(path: str) -> tuple[Any, str]:
    """The fsspec filesystem for `path` and the path as that filesystem spells it."""
    protocol = path.split("://", 1)[0] if "://" in path else "file"
    with _fs_lock:
        cached = _fs_cache.get(protocol)
    if cached is None:
        import fsspec.core  # lazy: 60 ms that a local run never pays

        # Object stores' listing caches never expire: another process's lease or status would stay unseen.
        options = {"use_listings_cache": False} if protocol in CONDITIONAL_CREATE else {}
        fs, _ = fsspec.core.url_to_fs(path, **options)
        with _fs_lock:
            _fs_cache[protocol] = (fs, protocol)
    else:
        fs = cached[0]
    return fs, fs._strip_protocol(path)


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
        return os.path.abspath(os.path.expanduser(_local(path)))
    return path.rstrip("/")


def exists(path: str) -> bool:
    """Whether a file or directory exists at `path`."""
    if is_local(path):
        return os.path.exists(_local(path))
    fs, p = fs_and_path(path)
    return fs.exists(p)


def read_bytes(path: str) -> bytes | None:
    """The bytes of the file at `path`, or None when it does not exist."""
    if is_local(path):
        try:
            fd = os.open(_local(path), os.O_RDONLY)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            data = os.read(fd, 1 << 16)  # records are small: usually one read
            if len(data) < 1 << 16:
                return data
            chunks = [data]
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)
    fs, p = fs_and_path(path)
    try:
        return fs.cat_file(p)
    except FileNotFoundError:
        return None


def read_json(path: str) -> Any:
    """The parsed JSON record at `path`, or None when it is missing or unreadable: read as every
    record is, only from a regular file of at most 16 MiB (see `marin.execution.records`)."""
    from marin.execution.records import read_record_json  # records builds on this module

    return read_record_json(path)


def makedirs(path: str) -> None:
    """Create the directory `path` and its parents if missing (a no-op on object stores' flat keys)."""
    if is_local(path):
        os.makedirs(_local(path), exist_ok=True)
        return
    fs, p = fs_and_path(path)
    fs.makedirs(p, exist_ok=True)


def _write_local(path: str, data: bytes, flags: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | flags, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def write_bytes(path: str, data: bytes) -> None:
    """Write `data` to `path` (not atomic locally: for files read only after a later atomic marker)."""
    if is_local(path):
        _write_local(_local(path), data, os.O_TRUNC)
        return
    fs, p = fs_and_path(path)
    fs.pipe_file(p, data)


_pool = None


def overlapped(fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    """`[fn(x) for x in items]`, the calls made at once (up to 64 in flight) when they go to an object
    store: each is a round trip, and waiting for them one after another adds their latencies."""
    global _pool
    if len(items) < 2:
        return [fn(x) for x in items]
    if _pool is None:
        from concurrent.futures import ThreadPoolExecutor

        with _fs_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=64, thread_name_prefix="marin-storage")
    return list(_pool.map(fn, items))


def write_many(items: list[tuple[str, bytes]]) -> None:
    """`write_bytes` of each (path, data): one after another locally, at once on other stores."""
    if all(is_local(path) for path, _ in items):
        for path, data in items:
            write_bytes(path, data)
        return
    overlapped(lambda item: write_bytes(*item), items)


def append_bytes(path: str, data: bytes) -> None:
    """Append `data` to the file at `path`, creating it if needed (read-modify-write off local disk)."""
    if is_local(path):
        _write_local(_local(path), data, os.O_APPEND)
        return
    write_bytes(path, (read_bytes(path) or b"") + data)


def _write_temp(local: str, data: bytes) -> str:
    """Write `data` to a temporary file beside `local`, private to this thread; returns its path."""
    tmp = f"{local}.tmp-{os.getpid()}-{threading.get_ident()}"
    try:
        _write_local(tmp, data, os.O_TRUNC)
    except BaseException:
        remove(tmp)  # a write cut short (a full disk) leaves no temporary file
        raise
    return tmp


def write_atomic(path: str, data: bytes) -> None:
    """Replace the file at `path` so that a reader sees the old or the new bytes, never a mix."""
    if is_local(path):
        local = _local(path)
        tmp = _write_temp(local, data)
        try:
            os.replace(tmp, local)
        except BaseException:
            remove(tmp)
            raise
        return
    # One PUT of a whole object is atomic on GCS, S3 and memory://.
    fs, p = fs_and_path(path)
    fs.pipe_file(p, data)


# Stores whose own precondition makes `pipe_file(..., mode="create")` one conditional PUT that the
# server refuses when the object exists (gcsfs: `ifGenerationMatch=0`; s3fs: `If-None-Match: *`,
# which AWS S3 honours since 2024-08). fsspec's default "create" is check-then-write: never used.
CONDITIONAL_CREATE = {
    "gs": "ifGenerationMatch=0",
    "gcs": "ifGenerationMatch=0",
    "s3": "If-None-Match: *",
    "s3a": "If-None-Match: *",
}
_memory_create_lock = threading.Lock()


def create_exclusive(path: str, data: bytes) -> bool:
    """Create `path` holding `data` only if nothing is there; True when this call created it.

    Locally the bytes go to a temporary file that is then hard-linked to `path` (the link fails when
    `path` exists), so the file appears whole or not at all; a link that NFS replays (EEXIST, yet our
    temporary file has two links) counts as created, and only a filesystem without hard links
    (EPERM, ENOTSUP, ENOSYS) falls back to an `O_EXCL` create then a write. On GCS and S3 it is one
    PUT carrying the store's precondition (`CONDITIONAL_CREATE`); a refusal whose object holds our own
    bytes is a retried PUT that had succeeded (callers' `data` is unique, e.g. a lease token), so it
    counts as created. memory:// (one process) creates under a lock. Any other protocol must support
    fsspec's exclusive open mode "xb"; without it this raises rather than check-then-write.
    """
    if is_local(path):
        return _create_exclusive_local(_local(path), data)
    fs, p = fs_and_path(path)
    protocol = path.split("://", 1)[0]
    if protocol == "memory":
        with _memory_create_lock:
            if fs.exists(p):
                return False
            fs.pipe_file(p, data)
            return True
    try:
        if protocol in CONDITIONAL_CREATE:
            fs.pipe_file(p, data, mode="create")
        else:
            with fs.open(p, "xb") as f:
                f.write(data)
        return True
    except FileExistsError:
        return read_bytes(path) == data
    except (ValueError, NotImplementedError) as e:
        raise NotImplementedError(
            f"{protocol}:// offers no exclusive create (fsspec mode 'xb'), which leases need to run each step "
            f"once; use a local path, gs:// or s3:// as MARIN_PREFIX (creating {path})"
        ) from e


# Filesystems without hard links answer link() with these; only then is the non-atomic create used.
_NO_HARD_LINKS = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS})


def _create_exclusive_local(local: str, data: bytes) -> bool:
    # Write a private temporary file, then hard-link it to the name: link() fails if the name exists,
    # and the name never shows a half-written file (an O_EXCL create followed by a write would, to a
    # reader, or forever if the writer is killed in between).
    tmp = _write_temp(local, data)
    try:
        try:
            os.link(tmp, local)
        except FileExistsError:
            # NFS may replay a link() whose reply was lost: the retry finds the name, made by us. Our
            # temporary file then has two links.
            return os.stat(tmp).st_nlink == 2
        except OSError as e:
            if e.errno not in _NO_HARD_LINKS:
                raise
            try:
                _write_local(local, data, os.O_EXCL)  # no hard links here: exclusive create, then write
            except FileExistsError:
                return False
        return True
    finally:
        remove(tmp)


def modified_time(path: str) -> float | None:
    """When the file at `path` was last written (seconds since the epoch), or None when it is missing."""
    if is_local(path):
        try:
            return os.stat(_local(path)).st_mtime
        except (FileNotFoundError, NotADirectoryError):
            return None
    fs, p = fs_and_path(path)
    try:
        return fs.modified(p).timestamp()
    except FileNotFoundError:
        return None
    except (NotImplementedError, AttributeError, ValueError):
        return None


def remove(path: str) -> None:
    """Delete the file at `path` if it exists."""
    if is_local(path):
        try:
            os.unlink(_local(path))
        except FileNotFoundError:
            pass
        return
    fs, p = fs_and_path(path)
    try:
        fs.rm_file(p)
    except FileNotFoundError:
        pass


def remove_tree(path: str) -> None:
    """Delete a file or a directory tree at `path` if it exists."""
    if is_local(path):
        local = _local(path)
        if os.path.isdir(local) and not os.path.islink(local):
            shutil.rmtree(local, ignore_errors=True)
        else:
            remove(local)
        return
    fs, p = fs_and_path(path)
    try:
        fs.rm(p, recursive=True)
    except FileNotFoundError:
        pass


def list_names(path: str) -> list[str]:
    """The names directly inside the directory `path` (empty when it does not exist)."""
    if is_local(path):
        try:
            return os.listdir(_local(path))
        except (FileNotFoundError, NotADirectoryError):
            return []
    fs, p = fs_and_path(path)
    try:
        return [basename(entry) for entry in fs.ls(p, detail=False) if basename(entry)]
    except FileNotFoundError:
        return []


def move(src: str, dst: str) -> None:
    """Move a file or directory (a rename locally; a copy then delete on object stores)."""
    if is_local(src) and is_local(dst):
        os.replace(_local(src), _local(dst))
        return
    fs, p = fs_and_path(src)
    _, q = fs_and_path(dst)
    files = [rel for rel, _ in walk_files(src)]
    if not files:
        fs.mv(p, q)  # a single object
        return
    # Copy the objects by name, then delete: fsspec's recursive mv also tries to copy the folder itself,
    # which S3 has no object for.
    fs.copy([f"{p}/{rel}" for rel in files], [f"{q}/{rel}" for rel in files])
    fs.rm(p, recursive=True)


def walk_files(path: str) -> Iterator[tuple[str, int]]:
    """Yield (path relative to `path`, size in bytes) for every file under the directory `path`."""
    if is_local(path):
        root = _local(path)
        stack = [""]
        while stack:
            rel = stack.pop()
            try:
                entries = os.scandir(os.path.join(root, rel) if rel else root)
            except (FileNotFoundError, NotADirectoryError):
                continue
            with entries:
                for entry in entries:
                    name = f"{rel}/{entry.name}" if rel else entry.name
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(name)
                    else:
                        yield name, entry.stat(follow_symlinks=False).st_size
        return
    fs, p = fs_and_path(path)
    try:
        found = fs.find(p, detail=True)
    except FileNotFoundError:
        return
    base = p.rstrip("/") + "/"
    for full, info in found.items():
        if info.get("type") == "file" and full.startswith(base):
            yield full[len(base) :], int(info.get("size") or 0)


def find_dirs_with(root: str, wanted: Callable[[str], bool]) -> Iterator[tuple[str, list[str]]]:
    """Yield (directory, its file names) for each directory under `root` holding a file `wanted` accepts.

    Such a directory is not searched further: step outputs do not nest records.
    """
    if is_local(root):
        for dirpath, dirnames, filenames in os.walk(_local(root)):
            if any(wanted(n) for n in filenames):
                dirnames[:] = []
                yield dirpath, filenames
        return
    fs, p = fs_and_path(root)
    protocol = root.split("://", 1)[0]
    try:
        found = fs.find(p)
    except FileNotFoundError:
        return
    by_dir: dict[str, list[str]] = {}
    base = p.rstrip("/") + "/"
    for full in found:
        if not full.startswith(base):
            continue  # `root` is a file itself (S3 and GCS find it by name), or a sibling sharing its prefix
        directory, _, name = full.rpartition("/")
        by_dir.setdefault(directory, []).append(name)
    for directory, names in sorted(by_dir.items()):
        if any(wanted(n) for n in names):
            yield f"{protocol}://{directory.lstrip('/')}", names
