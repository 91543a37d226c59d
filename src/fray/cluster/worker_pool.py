"""Warm worker processes for LocalCluster: fresh interpreters (`python -m fray.task_process`, never a
fork) started on first use and reused task after task, one task at a time each, like Ray's workers."""

from __future__ import annotations

import pickle
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection


class WorkerLostError(Exception):
    """The worker process died (killed, crashed, out of memory) before it replied."""


class Worker:
    """One interpreter running `python -m fray.task_process FD`, talking over a socket pair.

    Its stdout/stderr outside tasks are the parent's stderr (where a worker that cannot start says
    why); during a task they go to the task's log.
    """

    def __init__(self, env: dict[str, str]):
        ours, theirs = socket.socketpair()
        with theirs:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "fray.task_process", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=2,
                env=env,
            )
        self._conn = Connection(ours.detach())
        self.pid = self.process.pid

    def run(
        self,
        log_file: str,
        environ: dict[str, str],
        payload: bytes,
        *,
        while_waiting: Callable[[], None] | None = None,
        poll_s: float = 0.2,
    ) -> bytes:
        """Run one task; its pickled outcome. Calls `while_waiting` every `poll_s` seconds meanwhile.

        Raises WorkerLostError when the process dies first.
        """
        try:
            self._conn.send_bytes(pickle.dumps((log_file, environ, list(sys.path), payload)))
            while not self._conn.poll(poll_s):
                # A task's forked children may hold the socket open after the worker died: look at it too.
                if self.process.poll() is not None and not self._conn.poll(0):
                    raise WorkerLostError
                if while_waiting is not None:
                    while_waiting()
            return self._conn.recv_bytes()
        except (EOFError, OSError) as exc:
            raise WorkerLostError from exc

    def exit_code(self, timeout: float = 10.0) -> int | None:
        """The process's exit code once it has ended (None if it is still alive after `timeout`)."""
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self, timeout: float = 10.0) -> None:
        """Let the worker exit (its socket closes) and wait for it; kill it if it does not."""
        self._conn.close()
        if self.exit_code(timeout) is None:
            self.kill()

    def kill(self) -> None:
        """SIGKILL the worker (its running task's caller gets WorkerLostError)."""
        self.process.kill()
        self.process.wait()


class WorkerPool:
    """Idle workers waiting for a task (at most `max_idle` kept), and the busy ones, to kill on demand.

    A task that must start in its own environment (GPUs, env_vars) gets a dedicated worker, ended
    after it; all others share the warm ones.
    """

    def __init__(self, max_idle: int):
        self.max_idle = max_idle
        self._idle: list[Worker] = []
        self._busy: set[Worker] = set()
        self._lock = threading.Lock()

    def take(self, env: dict[str, str], *, dedicated: bool) -> Worker:
        """An idle warm worker, else a new one started with `env`."""
        worker = None
        with self._lock:
            while not dedicated and self._idle and worker is None:
                candidate = self._idle.pop()
                worker = candidate if candidate.alive() else None
        worker = worker or Worker(env)
        with self._lock:
            self._busy.add(worker)
        return worker

    def give_back(self, worker: Worker, *, reusable: bool) -> None:
        """Return a worker whose task finished: kept warm if `reusable` and there is room, else ended."""
        with self._lock:
            self._busy.discard(worker)
            keep = reusable and worker.alive() and len(self._idle) < self.max_idle
            if keep:
                self._idle.append(worker)
        if not keep:
            worker.close()

    def kill_busy(self) -> None:
        """SIGKILL every worker running a task."""
        with self._lock:
            busy = list(self._busy)
        for worker in busy:
            worker.kill()

    def close(self) -> None:
        """End the idle workers."""
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.close()
