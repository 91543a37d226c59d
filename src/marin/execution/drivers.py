"""The runner's step drivers (threads fed by a queue) and its SIGINT/SIGTERM routing."""

from __future__ import annotations

import os
import queue
import signal
import threading
from typing import Any

from marin.execution.interrupt import Interrupt


class Drivers:
    """Up to `size` threads that each drive one step at a time, fed by a queue (`drive(*item)`).

    A step is handed over with one `SimpleQueue.put` (a thread pool's `submit` allocates a Future
    and its Condition per step: a quarter of a millisecond of a 10,000-step run's critical path).
    Threads start as steps need them. After `shutdown(wait=False)` (an interrupt) the steps still
    queued are dropped and running ones are not waited for.
    """

    def __init__(self, size: int, drive: Any):
        self._size = size
        self._drive = drive
        self._work: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._lock = threading.Lock()
        self._dropping = False

    def submit(self, item: tuple) -> None:
        with self._lock:
            start = self._idle == 0 and len(self._threads) < self._size
            self._idle -= 0 if start else 1
        if start:
            thread = threading.Thread(target=self._loop, name=f"marin-driver_{len(self._threads)}")
            self._threads.append(thread)
            thread.start()
        self._work.put(item)

    def _loop(self) -> None:
        while (item := self._work.get()) is not None:
            if not self._dropping:
                self._drive(*item)
            with self._lock:
                self._idle += 1

    def shutdown(self, wait: bool) -> None:
        self._dropping = not wait
        for _ in self._threads:
            self._work.put(None)
        if wait:
            for thread in self._threads:
                thread.join()


def install_signal_handlers(done_events: queue.SimpleQueue, interrupt: Interrupt):
    """Route SIGINT/SIGTERM to the scheduler (as an event on its queue); returns a function restoring the
    previous handlers. Only the main thread can install handlers: elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def handle(signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if interrupt.is_set:
            os.write(2, f"marin: {name} again: exiting now\n".encode())
            os._exit(128 + signum)
        interrupt.mark(name)
        done_events.put((-1, name))  # SimpleQueue.put is safe in a signal handler

    for sig in previous:
        signal.signal(sig, handle)

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)  # None: set outside Python

    return restore
