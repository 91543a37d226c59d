"""A worker never outlives the process that started it: it dies the moment its parent does.

A worker whose runner was SIGKILLed must not go on running its task: the runner's lease goes stale,
another runner takes the step over, and an orphan still writing into the output would race it. So a
worker asks the kernel to SIGKILL it when its parent ends (Linux's `PR_SET_PDEATHSIG`): no poll to
wait for, no GIL to take, nothing the task can delay. Where that call does not exist (macOS), a
thread polls the parent pid instead, 20 times a second.

`PR_SET_PDEATHSIG` fires when the *thread* that started the child ends, not only its process. A pool
starts workers from whatever thread asks for one, and warm workers outlive those threads; so every
worker is started from one thread that lives as long as the process (`spawn`).
"""

from __future__ import annotations

import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

_PR_SET_PDEATHSIG = 1
ORPHAN_EXIT_CODE = 70  # a worker that found its parent already gone as it started
# procpool's threads, which hold no lock while a process forks (a forked child forgets the spawner).
FORK_SAFE = frozenset({"procpool-spawner", "procpool-parent-watch"})

T = TypeVar("T")


def die_with_parent(parent: int | None = None, *, exit_code: int = ORPHAN_EXIT_CODE) -> None:
    """End this process as soon as its parent ends: SIGKILL from the kernel where it can (Linux), else a
    poll. `parent`: the pid the caller knows started it; if this process's parent is already another
    (it died before this call), exit at once. None: whatever the parent is now."""
    expected = os.getppid() if parent is None else parent
    if _kill_me_when_parent_dies():
        if os.getppid() != expected:  # it died before the kernel was asked to watch
            os._exit(exit_code)
        return

    def watch() -> None:
        while os.getppid() == expected:
            time.sleep(0.05)
        os._exit(exit_code)

    threading.Thread(target=watch, name="procpool-parent-watch", daemon=True).start()


def _kill_me_when_parent_dies() -> bool:
    """Ask the kernel to SIGKILL this process when its parent thread ends; whether it could."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes  # only here: a worker on another system never pays for it

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


class _Spawner:
    """One daemon thread that starts every child process, so their parent thread lives as long as
    this process does (see the module docstring)."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[tuple[Callable[[], Any], queue.SimpleQueue]] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name="procpool-spawner", daemon=True)
        self._thread.start()

    def call(self, start: Callable[[], T]) -> T:
        if threading.current_thread() is self._thread:
            return start()
        reply: queue.SimpleQueue = queue.SimpleQueue()
        self._calls.put((start, reply))
        ok, value = reply.get()
        if not ok:
            raise value
        return value

    def _serve(self) -> None:
        while True:
            start, reply = self._calls.get()
            try:
                reply.put((True, start()))
            except BaseException as exc:  # noqa: BLE001 - the caller raises it
                reply.put((False, exc))
            del start, reply


_spawner: _Spawner | None = None
_spawner_lock = threading.Lock()


def spawn(start: Callable[[], T]) -> T:
    """`start()` (which starts a child process) on the process's spawner thread, whose life is the
    process's: a child that asked to die with its parent dies only when this process does."""
    global _spawner
    if _spawner is None:
        with _spawner_lock:
            if _spawner is None:
                _spawner = _Spawner()
    return _spawner.call(start)


def _forget_spawner() -> None:
    global _spawner, _spawner_lock
    _spawner, _spawner_lock = None, threading.Lock()  # a forked child has no such thread


os.register_at_fork(after_in_child=_forget_spawner)
