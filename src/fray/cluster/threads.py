"""The process's one thread pool: the step runner's drivers and LocalCluster's dispatch both run on it.

`submit(fn, *args)` hands a call to an idle thread, or to a new one when every thread is busy: a
call may block on another one (a driver waits for the task a dispatch call runs), so the pool never
makes a call wait for a thread. Threads are kept once started (idle ones wait on one queue).

`defer(fn, *args)` from a thread of the pool keeps the call for that same thread: it runs when the
thread's current call returns, unless `run_now` has run it first (a future's `result()` does, when
the calling thread is the one waiting for it). Handing work on to the next part (a driver to the
dispatch of its step's task, a finished step to the next ready one) then costs no wake-up of
another thread. The rule this asks of a caller: a thread that defers a call must not block on what
that call produces except through `run_now` (it returns, or it runs the call itself). Elsewhere
`defer` is `submit`.

`waiting()` marks the calling thread as blocked on a task (not preparing work of its own);
`working()` counts the pool's threads that are not, plus the calls queued for a thread: how many
calls may shortly ask a cluster for cores (see LocalCluster).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

logger = logging.getLogger("fray")

_NAME = "fray-thread"


class Deferred:
    """A call kept by `defer` for the thread that deferred it; it runs once, by whoever claims it first."""

    __slots__ = ("fn", "args", "claimed")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]):
        self.fn = fn
        self.args = args
        self.claimed = False


class ThreadPool:
    """Threads that run calls (see the module docstring); `shared_pool()` is the process's one."""

    def __init__(self) -> None:
        self._work: queue.SimpleQueue[Deferred] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0  # threads waiting for a call, less those a submit has just woken
        self._queued = 0  # calls submitted that no thread has taken yet
        self._busy = 0  # threads running a call (or the calls it kept)
        self._waiting = 0  # of those, the ones blocked on a task (`waiting()`)
        self._local = threading.local()

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run `fn(*args)` on an idle thread, or on a new one when none is idle."""
        with self._lock:
            start = self._idle == 0
            if start:
                self._threads += 1
            else:
                self._idle -= 1
            self._queued += 1
            number = self._threads
        self._work.put(Deferred(fn, args))
        if start:
            threading.Thread(target=self._serve, name=f"{_NAME}-{number}", daemon=True).start()

    def defer(self, fn: Callable[..., Any], *args: Any) -> Deferred | None:
        """Keep `fn(*args)` for this thread (see the module docstring); returns the kept call, or None
        when this is no thread of the pool and the call was submitted instead."""
        kept = getattr(self._local, "kept", None)
        if kept is None:
            self.submit(fn, *args)
            return None
        call = Deferred(fn, args)
        kept.append(call)
        return call

    def run_now(self, call: Deferred) -> bool:
        """Run a deferred call in this thread unless it ran (or is running) already; whether it ran here."""
        if not self._claim(call):
            return False
        kept = getattr(self._local, "kept", None)
        if kept:  # no longer this thread's to run later (usually the call it kept last)
            if kept[-1] is call:
                kept.pop()
            elif call in kept:
                kept.remove(call)
        fn, args = call.fn, call.args
        call.fn, call.args = _done, ()  # what it refers to is freed as soon as it has run
        fn(*args)
        return True

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        """Mark the block as this thread waiting for a task, not preparing work (see `working`)."""
        if not self.on_pool_thread():
            yield
            return
        depth = getattr(self._local, "waiting", 0)
        self._local.waiting = depth + 1
        if depth == 0:
            with self._lock:
                self._waiting += 1
        try:
            yield
        finally:
            self._local.waiting = depth
            if depth == 0:
                with self._lock:
                    self._waiting -= 1

    def working(self) -> int:
        """The calls that may shortly ask for cores: queued ones, and running ones not `waiting()`,
        the calling thread's own left out."""
        own = self.on_pool_thread() and not getattr(self._local, "waiting", 0)
        with self._lock:
            return max(0, self._queued + self._busy - self._waiting - own)

    def on_pool_thread(self) -> bool:
        """Whether the calling thread is one of this pool's."""
        return getattr(self._local, "kept", None) is not None

    def _serve(self) -> None:
        kept: list[Deferred] = []
        self._local.kept = kept
        while True:
            call = self._work.get()
            with self._lock:
                self._queued -= 1
                self._busy += 1
            self._run(call)
            del call  # an idle thread holds nothing of the calls it ran
            while kept:
                self._run(kept.pop())
            with self._lock:
                self._busy -= 1
                self._idle += 1

    def _claim(self, call: Deferred) -> bool:
        with self._lock:
            if call.claimed:
                return False
            call.claimed = True
            return True

    def _run(self, call: Deferred) -> None:
        if not self._claim(call):
            return
        fn, args = call.fn, call.args
        call.fn, call.args = _done, ()
        try:
            fn(*args)
        except BaseException:  # noqa: BLE001 - a call's failure must not end the thread that ran it
            logger.exception("a call on the shared thread pool raised")


def _done() -> None:
    """What a deferred call becomes once it has run."""


_shared: ThreadPool | None = None
_shared_lock = threading.Lock()


def shared_pool() -> ThreadPool:
    """The process's one ThreadPool, made on first use."""
    global _shared
    if _shared is None:
        with _shared_lock:
            if _shared is None:
                _shared = ThreadPool()
    return _shared
