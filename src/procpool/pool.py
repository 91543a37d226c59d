"""A pool of warm workers: idle ones wait for the next request, busy ones can be killed on demand."""

from __future__ import annotations

import threading
from collections.abc import Callable

from procpool.process import WorkerProcess


class Pool:
    """Idle workers kept warm (at most `max_idle`) and the busy ones. Thread-safe."""

    def __init__(self, max_idle: int):
        self.max_idle = max_idle
        self._idle: list[WorkerProcess] = []
        self._busy: set[WorkerProcess] = set()
        self._lock = threading.Lock()

    def take(self, start: Callable[[], WorkerProcess], *, reuse: bool = True) -> WorkerProcess:
        """A live idle worker (unless `reuse` is False), else a new one from `start()`."""
        worker, dead = None, []
        with self._lock:
            while reuse and self._idle and worker is None:
                candidate = self._idle.pop()
                if candidate.alive():
                    worker = candidate
                else:
                    dead.append(candidate)
        for candidate in dead:
            candidate.close(0)
        worker = worker or start()
        with self._lock:
            self._busy.add(worker)
        return worker

    def give_back(self, worker: WorkerProcess, *, reusable: bool = True, timeout: float = 10.0) -> None:
        """Return a worker whose request finished: kept warm if `reusable` and there is room, else
        ended (waiting up to `timeout` for it to exit before it is killed)."""
        with self._lock:
            self._busy.discard(worker)
            keep = reusable and len(self._idle) < self.max_idle  # take() skips one that died idle
            if keep:
                self._idle.append(worker)
        if not keep:
            worker.close(timeout)

    def kill_busy(self) -> None:
        """SIGKILL every busy worker."""
        with self._lock:
            busy = list(self._busy)
        for worker in busy:
            worker.kill()

    def close(self) -> None:
        """End the idle workers (all asked first, then each waited for: they exit side by side)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.stop()
        for worker in idle:
            worker.close()
