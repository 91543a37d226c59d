"""Writes that racing readers and writers can rely on: atomic replace and exclusive create.

Locally: a temporary name then a rename (replace) or a hard link (create). On object stores: a single
PUT of the whole object, which is atomic on GCS, S3 and memory://, and for exclusive create the
store's own precondition (`CONDITIONAL_CREATE`). No fsync: records survive a killed process, not a
power cut.
"""

from __future__ import annotations

import errno
import os
import threading

from storage.files import read_bytes, remove, write_local
from storage.paths import CONDITIONAL_CREATE, fs_and_path, is_local, local_path, protocol_of

_memory_create_lock = threading.Lock()
# Filesystems without hard links answer link() with these; only then is the non-atomic create used.
_NO_HARD_LINKS = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS})


def write_temp(local: str, data: bytes) -> str:
    """Write `data` to a temporary file beside the local path `local`, private to this thread; returns its path."""
    tmp = f"{local}.tmp-{os.getpid()}-{threading.get_ident()}"
    try:
        write_local(tmp, data, os.O_TRUNC)
    except BaseException:
        remove(tmp)  # a write cut short (a full disk) leaves no temporary file
        raise
    return tmp


def write_atomic(path: str, data: bytes) -> None:
    """Replace the file at `path` so that a reader sees the old or the new bytes, never a mix."""
    if is_local(path):
        local = local_path(path)
        tmp = write_temp(local, data)
        try:
            os.replace(tmp, local)
        except BaseException:
            remove(tmp)
            raise
        return
    fs, p = fs_and_path(path)
    fs.pipe_file(p, data)


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
        return _create_exclusive_local(local_path(path), data)
    fs, p = fs_and_path(path)
    protocol = protocol_of(path)
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


def _create_exclusive_local(local: str, data: bytes) -> bool:
    # Write a private temporary file, then hard-link it to the name: link() fails if the name exists,
    # and the name never shows a half-written file (an O_EXCL create followed by a write would, to a
    # reader, or forever if the writer is killed in between).
    tmp = write_temp(local, data)
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
                write_local(local, data, os.O_EXCL)  # no hard links here: exclusive create, then write
            except FileExistsError:
                return False
        return True
    finally:
        remove(tmp)
