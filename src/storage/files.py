"""Whole-file operations: read, write, append, remove, move, stat and open, local or on any store."""

from __future__ import annotations

import errno
import os
import stat
from typing import IO

from storage.paths import fs_and_path, is_local, local_path

_FIRST_READ = 1 << 16  # records are small: usually one read
# How a file is opened only if it is a regular file: never through a symlink in the last component,
# and O_NONBLOCK so that opening a FIFO with no writer returns at once (fstat then refuses it).
REGULAR_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def exists(path: str) -> bool:
    """Whether a file or directory exists at `path`."""
    if is_local(path):
        return os.path.exists(local_path(path))
    fs, p = fs_and_path(path)
    return fs.exists(p)


def is_dir(path: str) -> bool:
    """Whether `path` is a directory (on an object store: a prefix that has objects under it)."""
    if is_local(path):
        return os.path.isdir(local_path(path))
    fs, p = fs_and_path(path)
    return fs.isdir(p)


def size(path: str) -> int | None:
    """The size of the file at `path` in bytes, or None when it is missing."""
    try:
        if is_local(path):
            return os.path.getsize(local_path(path))
        fs, p = fs_and_path(path)
        return int(fs.size(p))
    except (FileNotFoundError, NotADirectoryError):
        return None


def read_bytes(path: str) -> bytes | None:
    """The bytes of the file at `path`, or None when it does not exist."""
    if is_local(path):
        try:
            fd = os.open(local_path(path), os.O_RDONLY)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            data = os.read(fd, _FIRST_READ)
            if len(data) < _FIRST_READ:
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


def read_range(path: str, start: int, end: int) -> bytes:
    """Bytes `start` to `end` (exclusive) of the file at `path`, fewer where it ends first; one ranged
    read on an object store. FileNotFoundError when it is missing; IsADirectoryError for a directory."""
    if is_local(path):
        with open(local_path(path), "rb") as f:
            return os.pread(f.fileno(), max(0, end - start), start)
    fs, p = fs_and_path(path)
    return fs.cat_file(p, start=start, end=end)


def read_tail(path: str, max_bytes: int) -> bytes:
    """At most the last `max_bytes` bytes of the file at `path` (FileNotFoundError when missing)."""
    if is_local(path):
        with open(local_path(path), "rb") as f:
            end = f.seek(0, 2)
            f.seek(max(0, end - max_bytes))
            return f.read()
    fs, p = fs_and_path(path)
    end = int(fs.size(p))
    return fs.cat_file(p, start=max(0, end - max_bytes))


def makedirs(path: str) -> None:
    """Create the directory `path` and its parents if missing (a no-op on object stores' flat keys)."""
    if is_local(path):
        local = local_path(path)
        try:
            os.mkdir(local)  # the usual case, one folder in an existing one: one system call
        except FileNotFoundError:  # a parent is missing
            os.makedirs(local, exist_ok=True)
        except FileExistsError:
            if not os.path.isdir(local):
                raise
        return
    fs, p = fs_and_path(path)
    fs.makedirs(p, exist_ok=True)


def write_local(path: str, data: bytes, flags: int) -> None:
    """`os.open(path, O_WRONLY | O_CREAT | flags)` then one write of `data` (a local OS path)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | flags, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def write_bytes(path: str, data: bytes) -> None:
    """Write `data` to `path` (not atomic locally: for files read only after a later atomic marker)."""
    if is_local(path):
        write_local(local_path(path), data, os.O_TRUNC)
        return
    fs, p = fs_and_path(path)
    fs.pipe_file(p, data)


def append_bytes(path: str, data: bytes) -> None:
    """Append `data` to the file at `path`, creating it if needed.

    For one-off notes only (a failure message at the end of a log). Object stores have no append:
    there it reads and rewrites the whole object, so calling it in a loop moves bytes quadratic in the
    file's length. Something written repeatedly (metrics) writes numbered whole parts instead.
    """
    if is_local(path):
        write_local(local_path(path), data, os.O_APPEND)
        return
    write_bytes(path, (read_bytes(path) or b"") + data)


def open_file(path: str, mode: str = "rb", *, buffering: int = -1) -> IO[bytes]:
    """A binary file object at `path` ("rb" or "wb"): the builtin `open` locally (with `buffering`),
    fsspec's otherwise."""
    if mode not in ("rb", "wb"):
        raise ValueError(f"open_file takes mode 'rb' or 'wb', not {mode!r} (opening {path})")
    if is_local(path):
        return open(local_path(path), mode, buffering=buffering)
    fs, p = fs_and_path(path)
    return fs.open(p, mode)


class NotRegularFile(OSError):
    """A local path where a regular file was wanted holds a symlink, FIFO, device, directory or socket.
    `kind` names which."""

    def __init__(self, path: str, kind: str):
        self.path = path
        self.kind = kind
        super().__init__(errno.EINVAL, f"it is a {kind}, not a regular file", path)


def kind_of(mode: int) -> str:
    """What a file of `st_mode` `mode` is, in words: 'regular file', 'FIFO', 'device', 'directory'..."""
    if stat.S_ISREG(mode):
        return "regular file"
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "special file"


def open_regular_fd(path: str) -> tuple[int, os.stat_result]:
    """A read-only descriptor of the local regular file at `path`, and its stat.

    It never follows a symlink in the last component and never blocks: a FIFO with no writer would
    hang a plain `open`. NotRegularFile when `path` is anything but a regular file (a symlink
    included); FileNotFoundError when it is missing.
    """
    try:
        fd = os.open(local_path(path), REGULAR_FLAGS)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise NotRegularFile(path, "symlink") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(path, kind_of(st.st_mode))
        # O_NONBLOCK stays set: a regular file ignores it, and clearing it would cost two syscalls
        # on the engine's hot path (every status read).
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def open_regular(path: str) -> IO[bytes]:
    """A binary reader of the file at `path` that refuses what is not a regular file (see
    `open_regular_fd`) locally; fsspec's reader elsewhere (an object store has only objects)."""
    if is_local(path):
        fd, _ = open_regular_fd(path)
        return os.fdopen(fd, "rb")
    fs, p = fs_and_path(path)
    return fs.open(p, "rb")


def upload(local: str, path: str) -> None:
    """Copy the local file `local` to `path` in one write (one object on a store)."""
    if is_local(path):
        import shutil  # lazy: shutil imports the compression modules, and few processes copy files

        shutil.copyfile(local, local_path(path))
        return
    fs, p = fs_and_path(path)
    fs.put_file(local, p)


def download(path: str, local: str) -> bool:
    """Copy the file at `path` to the local file `local`; False when there is none at `path`."""
    if is_local(path):
        import shutil

        try:
            shutil.copyfile(local_path(path), local)
        except FileNotFoundError:
            return False
        return True
    fs, p = fs_and_path(path)
    try:
        fs.get_file(p, local)
    except FileNotFoundError:
        return False
    return True


def modified_time(path: str) -> float | None:
    """When the file at `path` was last written (seconds since the epoch), or None when it is missing."""
    if is_local(path):
        try:
            return os.stat(local_path(path)).st_mtime
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
            os.unlink(local_path(path))
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
        local = local_path(path)
        if os.path.isdir(local) and not os.path.islink(local):
            import shutil

            shutil.rmtree(local, ignore_errors=True)
        else:
            remove(local)
        return
    fs, p = fs_and_path(path)
    try:
        fs.rm(p, recursive=True)
    except FileNotFoundError:
        pass


def remove_empty_dir(path: str) -> None:
    """Delete the directory `path` if it exists and is empty (object stores have no empty directories)."""
    if is_local(path):
        try:
            os.rmdir(local_path(path))
        except OSError:  # missing, or not empty
            pass
