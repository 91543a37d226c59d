"""One worker process and its connection: send a request, wait for the reply or the process's death."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import select
import socket
import subprocess
import sys
from collections.abc import Callable, Iterable
from multiprocessing.connection import Connection, wait
from typing import Any

from procpool.lifeline import spawn
from procpool.serve import serve


class WorkerLostError(Exception):
    """The worker process died (killed, crashed, out of memory) before it replied."""


class WorkerProcess:
    """A process that answers each request (bytes) with `handler(request)` (bytes), one at a time.

    `handler` and `setup` (called once at start) name functions as `module:function`. `start` is
    "exec" (a fresh interpreter, `python -m procpool.serve`, with environment `env`: never a fork,
    so safe from a driver that runs threads) or a multiprocessing start method ("fork",
    "forkserver", "spawn"). An "exec" worker's stdout is the parent's stderr. Every worker dies the
    moment the process that started it does (`procpool.lifeline`).
    """

    def __init__(
        self,
        handler: str,
        *,
        start: str = "exec",
        setup: str | None = None,
        env: dict[str, str] | None = None,
    ):
        self.notes: dict[str, Any] = {}
        self._poller: select.poll | None = (
            None  # the caller's own: what it knows of this worker (what it last sent)
        )
        self._popen: subprocess.Popen | None = None
        self._process = None
        self._pidfd: int | None = None
        if start == "exec":
            ours, theirs = socket.socketpair()
            argv = [sys.executable, "-m", "procpool.serve", str(theirs.fileno()), handler, setup or ""]
            argv.append(str(os.getpid()))  # the parent it must die with
            with theirs:
                self._popen = spawn(
                    lambda: subprocess.Popen(
                        argv, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=2, env=env
                    )
                )
            self._conn = Connection(ours.detach())
            self.pid = self._popen.pid
            with contextlib.suppress(AttributeError, OSError):  # no pidfd (not Linux): replies are polled
                self._pidfd = os.pidfd_open(self.pid)
            sentinel = self._pidfd
        else:
            ctx = mp.get_context(start)
            self._conn, child = ctx.Pipe(duplex=True)
            # A forkserver's children are its own: they die with it, and it with this process.
            parent = None if start == "forkserver" else os.getpid()
            self._process = ctx.Process(
                target=serve, args=(child, handler, setup, parent), daemon=True, name="procpool-worker"
            )
            spawn(self._process.start)
            child.close()
            self.pid = self._process.pid
            sentinel = self._process.sentinel
        # What becomes ready when a reply arrives or the process ends (a task's forked children may
        # hold the socket open after the worker died: its sentinel says so).
        self.handles: list = [self._conn] if sentinel is None else [self._conn, sentinel]

    def send(self, request: bytes) -> None:
        """Hand the worker a request. Raises WorkerLostError when it is already dead."""
        try:
            self._conn.send_bytes(request)
        except OSError as exc:
            raise WorkerLostError from exc

    def poll_reply(self) -> bytes | None:
        """The reply, once it has arrived; None while the request runs.

        Raises WorkerLostError when the process died without replying.
        """
        try:
            if self._conn.poll():
                return self._conn.recv_bytes()
        except (EOFError, OSError) as exc:
            raise WorkerLostError from exc
        if not self.alive():
            raise WorkerLostError
        return None

    def call(
        self, request: bytes, *, while_waiting: Callable[[], None] | None = None, poll_s: float = 0.2
    ) -> bytes:
        """Send `request` and wait for its reply, calling `while_waiting` every `poll_s` seconds meanwhile.

        Raises WorkerLostError when the process dies first.
        """
        self.send(request)
        if self._poller is None and hasattr(select, "poll"):
            # One poll object for the worker's life: Connection.poll builds and tears down a
            # selector on every call, a tenth of a trivial task's dispatch in the caller.
            self._poller = select.poll()
            self._poller.register(self._conn.fileno(), select.POLLIN)
        if self._poller is not None:
            ready, wait = self._poller.poll, max(1, int(poll_s * 1000))
        else:
            ready, wait = self._conn.poll, poll_s
        try:
            while not ready(wait):
                # A task's forked children may hold the socket open after the worker died: look at it too.
                if not self.alive() and not self._conn.poll(0):
                    raise WorkerLostError
                if while_waiting is not None:
                    while_waiting()
            return self._conn.recv_bytes()
        except (EOFError, OSError) as exc:
            raise WorkerLostError from exc

    def alive(self) -> bool:
        if self._popen is not None:
            return self._popen.poll() is None
        return self._process.is_alive()

    def exit_code(self, timeout: float = 10.0) -> int | None:
        """The process's exit code once it has ended (None if it is still alive after `timeout`)."""
        if self._popen is not None:
            try:
                return self._popen.wait(timeout)
            except subprocess.TimeoutExpired:
                return None
        self._process.join(timeout)
        return self._process.exitcode

    def terminate(self) -> None:
        """SIGTERM the worker without waiting: its task may handle it (write a checkpoint) and end;
        `kill()` ends it for sure."""
        with contextlib.suppress(ProcessLookupError):
            if self._popen is not None:
                self._popen.terminate()
            else:
                self._process.terminate()

    def kill(self) -> None:
        """SIGKILL the worker and reap it (whoever waits for its reply gets WorkerLostError)."""
        if self._popen is not None:
            self._popen.kill()
            self._popen.wait()
        else:
            self._process.kill()
            self._process.join()

    def stop(self) -> None:
        """Ask the worker to exit, without waiting for it (close() waits)."""
        if not self._conn.closed:
            with contextlib.suppress(OSError):
                self._conn.send_bytes(b"")
            self._conn.close()

    def close(self, timeout: float = 10.0) -> None:
        """Ask the worker to exit and wait `timeout` for it; kill it if it does not."""
        self.stop()
        if self.exit_code(timeout) is None:
            self.kill()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


def ready(workers: Iterable[WorkerProcess], timeout: float | None = None) -> list[WorkerProcess]:
    """The workers among `workers` that have a reply or have died, waiting up to `timeout` for one."""
    by_handle = {handle: worker for worker in workers for handle in worker.handles}
    return list(dict.fromkeys(by_handle[handle] for handle in wait(list(by_handle), timeout)))
