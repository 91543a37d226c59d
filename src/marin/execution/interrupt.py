"""A runner's stop switch: set once on SIGINT/SIGTERM, it cancels the running steps' tasks gently
(each has `grace_s` to end by itself: a training finishes its step and writes its checkpoint); and
the signal handlers that set it (a second signal exits the process at once)."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from typing import Any

from fray.cluster import Cluster

# How long a step told to stop may take to end by itself before its process is killed: a training
# finishes the step under way and writes its checkpoint (seconds on a laptop; a large model's write to
# a bucket can take a minute).
DEFAULT_STOP_GRACE_S = 60.0


class Interrupt:
    """Set once when the runner is told to stop (SIGINT/SIGTERM); cancels every registered task
    through the cluster, and any task registered after, each given `grace_s` to end by itself."""

    def __init__(self, cluster: Cluster, grace_s: float = DEFAULT_STOP_GRACE_S):
        self._cluster = cluster
        self.grace_s = grace_s
        self._lock = threading.Lock()
        self._futures: dict[Any, str] = {}
        self.reason: str | None = None
        self.signal_name: str | None = None

    @property
    def is_set(self) -> bool:
        """Whether the run was interrupted."""
        return self.reason is not None

    def mark(self, signal_name: str) -> None:
        """Note the signal without cancelling anything yet (safe in a signal handler: two assignments),
        so a step that fails from the same Ctrl-C (its process got it too) is recorded INTERRUPTED."""
        if self.reason is None:
            self.signal_name = signal_name
            self.reason = f"the runner got {signal_name}"

    def trigger(self, reason: str) -> list[str]:
        """Interrupt the run: cancel every running task; returns their step names."""
        with self._lock:
            if self.reason is None:
                self.reason = reason
            running = list(self._futures.items())
        for future, _ in running:
            self._cluster.cancel(future, reason=reason, grace_s=self.grace_s)
        return [name for _, name in running]

    def register(self, future: Any, step: str) -> None:
        """Track a submitted task (cancelled at once if the run is already interrupted)."""
        with self._lock:
            self._futures[future] = step
            reason = self.reason
        if reason is not None:
            self._cluster.cancel(future, reason=reason, grace_s=self.grace_s)

    def unregister(self, future: Any) -> None:
        """Stop tracking a finished task."""
        with self._lock:
            self._futures.pop(future, None)


def install_signal_handlers(interrupt: Interrupt, wake: Callable[[str], None]) -> Callable[[], None]:
    """Route SIGINT/SIGTERM to the run: mark `interrupt` and call `wake(signal_name)` (which must be
    safe in a signal handler, e.g. a `SimpleQueue.put`); a second signal exits at once. Returns a
    function restoring the previous handlers. Only the main thread can install handlers: elsewhere
    this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def handle(signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if interrupt.is_set:
            os.write(2, f"marin: {name} again: exiting now\n".encode())
            os._exit(128 + signum)
        interrupt.mark(name)
        wake(name)

    for sig in previous:
        signal.signal(sig, handle)

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)  # None: set outside Python

    return restore
