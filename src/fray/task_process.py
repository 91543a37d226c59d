"""What a LocalCluster's warm worker runs, and the output capture it shares with Ray workers.

A LocalCluster worker is a procpool worker (`python -m procpool.serve`, a fresh interpreter) whose
handler is `handle` here. This module lives outside the fray.cluster package so that starting a
worker imports nothing but cloudpickle.

Each request is a pickled (log_file, header, environ, sys_path, payload); the worker appends
`header` (the attempt's first line) to `log_file`, runs the cloudpickled task in `payload` with file
descriptors 1 and 2 appended to it, `os.environ` set to `environ` (None: the environ of the latest
request that carried one; the parent sends it only when it changed) and the entries of `sys_path`
(None likewise) added, and then restores its cwd, environment, sys.path and sys.stdout/stderr, so one task's
changes to those never reach the next. The reply is the pickled outcome: ("ok", value) or
("error", exception-or-None, formatted traceback). Modules a task imported stay imported, and
threads it left running keep running, as in a reused Ray worker.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import sys
import traceback
from collections.abc import Iterator
from typing import Any

import cloudpickle


def run_task(payload: bytes) -> bytes:
    """Unpickle and call the task in `payload`; its outcome, pickled (as text when it cannot pickle).

    A failure travels as the exception and its traceback in this process without the exception's
    own lines (its message and notes), which the exception carries itself: the caller shows each
    once. An exception that cannot be pickled travels as the whole formatted text.
    """
    try:
        outcome: tuple[Any, ...] = ("ok", cloudpickle.loads(payload)())
    except BaseException as exc:  # noqa: BLE001 - every failure of the task goes back to the caller
        full = traceback.format_exc()
        own = "".join(traceback.format_exception_only(type(exc), exc))
        outcome = ("error", exc, full.removesuffix(own).rstrip() if full.endswith(own) else full, full)
    try:
        return cloudpickle.dumps(outcome[:3])
    except Exception:  # noqa: BLE001 - an unpicklable value or exception travels as text
        if outcome[0] == "ok":
            text = f"the task returned a {type(outcome[1]).__name__} that cannot be pickled:\n{traceback.format_exc()}"
        else:
            text = outcome[3]
        return cloudpickle.dumps(("error", None, text))


def _flush_std_streams() -> None:
    for stream in {sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__}:
        with contextlib.suppress(Exception):
            stream.flush()


@contextlib.contextmanager
def capture_fds(path: str, header: bytes = b"") -> Iterator[None]:
    """Append `header`, then this process's file descriptors 1 and 2 (so C code and child processes
    too), to the local file `path` for the duration of the block, then restore them."""
    _flush_std_streams()
    saved = os.dup(1), os.dup(2)
    log = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)  # one syscall, where open() makes four
    try:
        if header:
            os.write(log, header)
        os.dup2(log, 1)
        os.dup2(log, 2)
    finally:
        os.close(log)
    try:
        yield
    finally:
        _flush_std_streams()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def environ_snapshot() -> dict:
    """A copy of os.environ that compares equal exactly when the environment is the same, made in C:
    `dict(os.environ)` reads and decodes it name by name, which costs more than dispatching a task."""
    data = getattr(os.environ, "_data", None)  # CPython's encoded mapping behind os.environ
    return dict(data) if data is not None else dict(os.environ)


_known_environ: tuple[dict, dict[str, str]] | None = None  # (snapshot, dict(os.environ)) last seen


def current_environ() -> tuple[dict, dict[str, str]]:
    """(environ_snapshot(), dict(os.environ)), the latter decoded again only when the environment changed."""
    global _known_environ
    snapshot = environ_snapshot()
    known = _known_environ
    if known is not None and known[0] == snapshot:
        return known
    _known_environ = known = (snapshot, dict(os.environ))
    return known


@contextlib.contextmanager
def task_state(environ: dict[str, str], sys_path: list[str]) -> Iterator[None]:
    """Give the block `environ` as os.environ and the caller's sys.path entries; afterwards put back
    the cwd, environment, sys.path and sys.stdout/stderr this process had before."""
    cwd, path = os.getcwd(), list(sys.path)
    snapshot, env = current_environ()
    streams = sys.stdout, sys.stderr
    # Comparing whole dicts first is cheap; os.environ's per-name reads and writes are not, and most
    # tasks arrive with, and leave behind, the environment the worker already has.
    if env != environ:
        _replace_environ(environ)
    _set_torch_threads(environ)
    sys.path.extend(p for p in sys_path if p not in path)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = streams
        sys.path[:] = path
        if environ_snapshot() != snapshot:
            _replace_environ(env)
        os.chdir(cwd)


def _set_torch_threads(environ: dict[str, str]) -> None:
    """Give torch, when an earlier task of this process loaded it, the intra-op thread count the task
    is told (OMP_NUM_THREADS): torch reads that variable only when it loads."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    try:
        threads = int(environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        return
    if threads > 0 and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


def _replace_environ(wanted: dict[str, str]) -> None:
    for name in [n for n in os.environ if n not in wanted]:
        del os.environ[name]
    for name, value in wanted.items():
        if os.environ.get(name) != value:
            os.environ[name] = value


_last_sent: dict[str, Any] = {}  # the environ and sys_path of the latest requests that carried them


def handle(request: bytes) -> bytes:
    """A LocalCluster worker's answer to one request: run the task with its log and environment."""
    log_file, header, environ, sys_path, payload = pickle.loads(request)
    if environ is None:
        environ = _last_sent["environ"]
    else:
        _last_sent["environ"] = environ
    if sys_path is None:
        sys_path = _last_sent["sys_path"]
    else:
        _last_sent["sys_path"] = sys_path
    with capture_fds(log_file, header), task_state(environ, sys_path):
        return run_task(payload)
