"""Task logs: capture a process's stdout/stderr into a log path (local or any fsspec URL) and read its tail."""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import tempfile
import threading
import time
from collections.abc import Iterator

import storage
from fray.task_process import capture_fds


@contextlib.contextmanager
def local_log_file(log_path: str | None) -> Iterator[str]:
    """A local file to append the task's output to; for a remote `log_path`, uploaded when the block ends.

    Appending (not truncating) keeps every attempt of a retried task in one log. A remote log is
    written once, at the end, as one object: created exclusively when there is none yet (one call,
    the usual case), else fetched and written back whole with this attempt's lines after the earlier
    ones (an object store has no append).
    """
    if log_path is None:
        yield os.devnull
        return
    if storage.is_local(log_path):
        path = storage.local_path(log_path)
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):  # one stat for the usual case, the step's existing output directory
            os.makedirs(directory, exist_ok=True)
        yield path
        return
    fd, tmp = tempfile.mkstemp(prefix="fray-log-", suffix=".log")
    os.close(fd)
    try:
        yield tmp
    finally:
        with open(tmp, "rb") as f:
            lines = f.read()
        os.unlink(tmp)
        _append_remote(log_path, lines)


def _append_remote(log_path: str, lines: bytes) -> None:
    try:
        if storage.create_exclusive(log_path, lines):
            return
    except NotImplementedError:  # a store without exclusive create: fetch whatever is there
        pass
    storage.write_atomic(log_path, (storage.read_bytes(log_path) or b"") + lines)


def attempt_header(name: str, *, pid: int | None = None) -> bytes:
    """The line that opens one attempt of a task in its log: which task, where (host, the pid of the
    process running it, this one by default) and when."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    return f"=== fray: task {name!r} starting on {_host()} pid {pid or os.getpid()} at {stamp} ===\n".encode()


@functools.cache
def _host() -> str:
    return socket.gethostname()  # a system call per task otherwise; a host's name stays put while it runs


@contextlib.contextmanager
def redirect_output(log_path: str | None, name: str, *, echo: bool = False) -> Iterator[None]:
    """Send this process's stdout and stderr (file descriptors 1 and 2, so child processes and C code
    too) to `log_path` for the duration of the block, then restore them.

    Used where a task runs inside a long-lived worker process (a Ray worker) that runs other tasks
    before and after. With `echo`, each whole line written to the log is also written to the
    process's own stderr as it comes (progress bars at most once a second, as LocalCluster's echo
    shows them); a Ray worker's stderr reaches the driver's terminal.
    """
    if log_path is None:
        yield
        return
    with local_log_file(log_path) as path:
        with open(path, "ab") as log:
            log.write(attempt_header(name))
        if not echo:
            with capture_fds(path):
                yield
            return
        with _echoing(path, name), capture_fds(path):
            yield


@contextlib.contextmanager
def _echoing(path: str, name: str) -> Iterator[None]:
    """A thread copying the lines appended to `path` to this process's stderr as it is now."""
    from fray.cluster.echo import LogEcho

    terminal = os.fdopen(os.dup(2), "w", buffering=1)
    echo = LogEcho(path, name, out=terminal, show_name=False)
    stop = threading.Event()

    def pump() -> None:
        while not stop.wait(0.2):
            echo.pump()

    thread = threading.Thread(target=pump, name=f"fray-echo-{name}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        echo.close()
        terminal.close()


def tail(log_path: str | None, lines: int = 40, max_bytes: int = 64 * 1024) -> str:
    """The last `lines` lines of a log (empty when there is none), to show with a failure."""
    if not log_path:
        return ""
    try:
        data = _read_end(log_path, max_bytes)
    except OSError:  # FileNotFoundError included: no log yet
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


def _read_end(log_path: str, max_bytes: int) -> bytes:
    """At most the last `max_bytes` bytes of a log."""
    return storage.read_tail(log_path, max_bytes)
