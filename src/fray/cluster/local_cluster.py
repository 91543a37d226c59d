"""LocalCluster: each task runs in a worker process (a fresh interpreter of the current environment,
kept warm and reused for later tasks).

Tasks start in submission order as soon as the machine's free cores, memory and GPUs cover what
they ask for (a later task that fits may start before an earlier one that does not yet). A task that
could never fit on this machine fails at once instead of waiting forever.
"""

from __future__ import annotations

import collections
import concurrent.futures
import functools
import math
import os
import pickle
import queue
import sys
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import cloudpickle

from fray.cluster.base import Cluster
from fray.cluster.capacity import Capacity
from fray.cluster.echo import LogEcho
from fray.cluster.errors import (
    PlacementIgnoredWarning,
    RemoteTaskError,
    ResourcesUnavailableError,
    TaskCancelledError,
    TaskLostError,
)
from fray.cluster.gang import local_gang
from fray.cluster.local_task import (
    InlineFuture,
    default_resources,
    missing_packages,
    read_outcome,
    start_worker,
)
from fray.cluster.logs import attempt_header, local_log_file, tail
from fray.cluster.resource_config import ResourceConfig
from fray.task_process import current_environ
from procpool.pool import Pool
from procpool.process import WorkerLostError, WorkerProcess


@dataclass
class _Pending:
    name: str
    payload: bytes
    resources: ResourceConfig
    log_path: str | None
    future: concurrent.futures.Future
    new_log: bool = False  # nothing is at log_path yet: no earlier log to fetch
    gpu_ids: list[str] = field(default_factory=list)
    worker: WorkerProcess | None = (
        None  # while it runs its task; None again before the worker goes back to the pool
    )
    finished: bool = False  # its worker is back in the pool: cancel() must not touch it
    cancelled: str | None = None  # why cancel() stopped it
    # Started for a `submit_inline` caller, and not yet dispatched: its future's result() runs it.
    inline: bool = False


class LocalCluster(Cluster):
    """Runs each task in a worker process (a fresh interpreter, not a fork) of the current environment.

    `cpu`, `ram` (bytes) and `gpus` cap what running tasks may use together; each defaults to this
    machine's total. The task is cloudpickled, its stdout/stderr go to `log_path`, and its return
    value or exception comes back pickled. Workers start on first use and are reused, one task at a
    time each (so a task pays no interpreter start-up); a task that asks for GPUs or sets env_vars
    gets a worker of its own, started with that environment and ended after it. With `echo`, the
    lines a running task writes to its log are also shown on stderr, prefixed with its name.
    `cancel(future)` kills a running task's worker process.

    A machine has no region: a task's `regions` are ignored, with one PlacementIgnoredWarning per
    cluster (experiments declared for a cluster run on a laptop unchanged). `preemptible` needs
    nothing: this machine is not a preemptible node.
    """

    def __init__(
        self, *, cpu: float | None = None, ram: int | None = None, gpus: int | None = None, echo: bool = False
    ):
        machine = Capacity.of_this_machine()
        self.capacity = Capacity(
            cpu=machine.cpu if cpu is None else float(cpu),
            ram=machine.ram if ram is None else int(ram),
            gpus=machine.gpus if gpus is None else int(gpus),
        )
        self.echo = echo
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        ids = [d.strip() for d in visible.split(",") if d.strip()] if visible else []
        self._free_gpus = (ids or [str(i) for i in range(self.capacity.gpus)])[: self.capacity.gpus]
        self._free_cpu = self.capacity.cpu
        self._free_ram = self.capacity.ram
        self._lock = threading.Lock()
        self._queue: collections.deque[_Pending] = collections.deque()
        # Dispatch threads are kept and reused: starting a thread per task waits for it to boot.
        self._threads: list[threading.Thread] = []
        self._runnable: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._idle_threads = 0
        self._running = 0  # tasks started and not yet resolved
        self._all_done = threading.Condition(self._lock)
        self._tasks: dict[concurrent.futures.Future, _Pending] = {}  # queued or running, by future
        self._workers = Pool(max_idle=max(1, math.ceil(self.capacity.cpu)))
        self._closed = False
        self._warned_regions = False
        self._env_cache: tuple[tuple, dict[str, str]] | None = None  # see _base_env

    def submit(
        self,
        task: Callable[[], Any],
        *,
        name: str,
        resources: ResourceConfig | None = None,
        log_path: str | None = None,
        new_log: bool = False,
    ) -> concurrent.futures.Future:
        """Queue `task`; it starts in its own process once its resources are free."""
        return self._submit(task, name, resources, log_path, new_log, inline=False)

    def submit_inline(
        self,
        task: Callable[[], Any],
        *,
        name: str,
        resources: ResourceConfig | None = None,
        log_path: str | None = None,
        new_log: bool = False,
    ) -> concurrent.futures.Future:
        """As `submit`, but a task whose resources are free at once is dispatched by the caller's own
        `future.result()` (the caller waits for it next, in this thread): the dispatch thread's
        wake-up and the future's hand-back cost more than a trivial task itself. A task that must
        queue is dispatched by a dispatch thread as `submit`'s are."""
        return self._submit(task, name, resources, log_path, new_log, inline=True)

    def _submit(
        self,
        task: Callable[[], Any],
        name: str,
        resources: ResourceConfig | None,
        log_path: str | None,
        new_log: bool,
        *,
        inline: bool,
    ) -> concurrent.futures.Future:
        resources = resources or default_resources()
        if resources.replicas > 1:  # a gang: one launcher of R local processes, holding R times the request
            task, resources = local_gang(task, resources)
        if resources.regions and not self._warned_regions:
            self._warned_regions = True
            warnings.warn(
                f"LocalCluster ignores regions={resources.regions!r} of task {name!r} (and of every later "
                "task): this machine has no region; regions apply on a RayCluster",
                PlacementIgnoredWarning,
                stacklevel=2,
            )
        future = InlineFuture() if inline else concurrent.futures.Future()
        problem = self.capacity.why_never_fits(resources) or missing_packages(resources)
        if problem:
            future.set_exception(
                ResourcesUnavailableError(f"task {name!r} cannot run on this LocalCluster: {problem}")
            )
            return future
        try:
            payload = cloudpickle.dumps(task)
        except Exception as exc:  # noqa: BLE001 - report why the task cannot travel to its process
            future.set_exception(
                RemoteTaskError(f"task {name!r} cannot be pickled to run in a subprocess: {exc}")
            )
            return future
        with self._lock:
            if self._closed:
                raise RuntimeError("LocalCluster.submit after shutdown()")
            pending = _Pending(name, payload, resources, log_path, future, new_log=new_log)
            if inline:
                future.dispatch = functools.partial(self._dispatch_here, pending)
            self._queue.append(pending)
            self._tasks[future] = pending
            self._start_what_fits(pending if inline else None)
        return future

    def cancel(self, future: concurrent.futures.Future, reason: str = "") -> None:
        """Keep a queued task from starting, or SIGKILL the worker process of a running one (its future
        then fails with TaskCancelledError naming `reason`). A task that has finished is left alone."""
        with self._lock:
            pending = self._tasks.get(future)
            if pending is None or pending.finished or pending.cancelled is not None:
                return
            pending.cancelled = reason or "cancelled"
            queued = pending in self._queue
            if queued:
                self._queue.remove(pending)
                del self._tasks[future]
            elif pending.worker is not None:  # else it is between start and take(): _run sees `cancelled`
                # Under the lock: _run hands the worker back to the pool (where the next task may
                # take it) only after marking the task finished under this lock.
                pending.worker.kill()
        if queued:
            future.cancel()  # outside the lock: it runs done callbacks, which may call back into us

    def shutdown(self, *, kill_running: bool = False) -> None:
        """Cancel queued tasks and wait for running ones (or kill them with `kill_running=True`)."""
        with self._lock:
            self._closed = True
            queued = list(self._queue)
            self._queue.clear()
            for pending in queued:
                self._tasks.pop(pending.future, None)
        for pending in queued:
            pending.future.cancel()  # outside the lock: it runs done callbacks, which may call back into us
        # Started for a `submit_inline` caller that has not called result(): resolved here instead.
        with self._lock:
            undispatched = [p for p in self._tasks.values() if p.inline]
            for pending in undispatched:
                pending.inline = False
                if kill_running:
                    pending.cancelled = "the cluster shut down"
        for pending in undispatched:
            self._run(pending, dispatch_thread=False)
        if kill_running:
            self._workers.kill_busy()
        with self._lock:
            while self._running:
                self._all_done.wait()
            threads, self._threads = self._threads, []
        for _ in threads:
            self._runnable.put(None)
        for thread in threads:
            thread.join()
        self._workers.close()

    # Everything below runs with self._lock held, or in a task's own thread.

    def _start_what_fits(self, inline: _Pending | None = None) -> None:
        """Start the queued tasks that fit; `inline` (a `submit_inline` task, being submitted by this
        thread) is left for its future's result() to dispatch."""
        for pending in list(self._queue):
            res = pending.resources
            ram = res.ram or 0
            if (
                res.cpu > self._free_cpu + 1e-9
                or ram > self._free_ram
                or res.gpu_count > len(self._free_gpus)
            ):
                continue
            self._queue.remove(pending)
            if not pending.future.set_running_or_notify_cancel():
                self._tasks.pop(pending.future, None)
                continue
            self._free_cpu -= res.cpu
            self._free_ram -= ram
            pending.gpu_ids = [self._free_gpus.pop(0) for _ in range(res.gpu_count)]
            self._running += 1
            if pending is inline:
                pending.inline = True
                continue
            self._runnable.put(pending)
            if self._idle_threads:
                self._idle_threads -= 1  # that idle thread takes it
            else:
                thread = threading.Thread(target=self._serve, name="fray-local-dispatch", daemon=True)
                self._threads.append(thread)
                thread.start()

    def _serve(self) -> None:
        """A dispatch thread: run the started tasks one at a time until shutdown() sends None."""
        while (pending := self._runnable.get()) is not None:
            self._run(pending)

    def _dispatch_here(self, pending: _Pending) -> None:
        """Run a `submit_inline` task in this thread, unless it never started here or already ran."""
        with self._lock:
            if not pending.inline:
                return
            pending.inline = False
        self._run(pending, dispatch_thread=False)

    def _release(self, pending: _Pending) -> None:
        with self._lock:
            self._free_cpu += pending.resources.cpu
            self._free_ram += pending.resources.ram or 0
            self._free_gpus.extend(pending.gpu_ids)
            if not self._closed:
                self._start_what_fits()

    def _run(self, pending: _Pending, dispatch_thread: bool = True) -> None:
        # A GPU task sets CUDA_VISIBLE_DEVICES, and env_vars may be read at import time (threads, caches):
        # such a task needs an interpreter that starts with its environment.
        dedicated = bool(pending.gpu_ids or pending.resources.env_vars)
        env = self._task_env(pending)
        try:
            with local_log_file(pending.log_path, new=pending.new_log) as log_file:
                worker = self._workers.take(functools.partial(start_worker, env), reuse=not dedicated)
                with self._lock:
                    pending.worker = worker
                try:
                    if pending.cancelled is not None:
                        outcome = self._cancelled(pending, killed=False)
                    else:
                        outcome = self._run_on(worker, pending, log_file, env)
                finally:
                    with self._lock:  # from now on cancel() leaves this worker (and its next task) alone
                        pending.finished = True
                        pending.worker = None
                    self._workers.give_back(worker, reusable=not dedicated)
        except BaseException as exc:  # noqa: BLE001 - never leave the future unresolved
            outcome = exc
        finally:
            self._release(pending)
        if isinstance(outcome, BaseException):
            pending.future.set_exception(outcome)
        else:
            pending.future.set_result(outcome[0])
        with self._lock:
            self._tasks.pop(pending.future, None)
            self._running -= 1
            if dispatch_thread:
                self._idle_threads += 1  # this thread goes back to waiting for the next task
            if not self._running:
                self._all_done.notify_all()

    def _run_on(
        self, worker: WorkerProcess, pending: _Pending, log_file: str, env: dict[str, str]
    ) -> tuple[Any] | BaseException:
        # The worker writes the attempt's header into the log it opens anyway; the environment and
        # sys.path travel only when they differ from what this worker was last sent.
        header = attempt_header(pending.name, pid=worker.pid)
        echo = None
        if self.echo and pending.log_path:
            try:
                start = os.stat(log_file).st_size
            except FileNotFoundError:
                start = 0
            echo = LogEcho(log_file, pending.name, start=start + len(header))
        sent = worker.notes
        path = tuple(sys.path)
        send_env = None if sent.get("env") is env else env
        send_path = None if sent.get("sys_path") == path else list(path)
        try:
            request = pickle.dumps((log_file, header, send_env, send_path, pending.payload))
            sent["env"], sent["sys_path"] = env, path
            reply = worker.call(request, while_waiting=echo.pump if echo else None)
        except WorkerLostError:
            if pending.cancelled is not None:
                return self._cancelled(pending, killed=True)
            return TaskLostError(
                f"task {pending.name!r}: its process (pid {worker.pid}) exited with code {worker.exit_code()} "
                f"before reporting a result (killed, out of memory or crashed); last lines of its log "
                f"{pending.log_path}:\n{tail(log_file)}"
            )
        finally:
            if echo:
                echo.close()
        return read_outcome(reply, pending)

    @staticmethod
    def _cancelled(pending: _Pending, *, killed: bool) -> TaskCancelledError:
        how = (
            f": its process (pid {pending.worker.pid}) was killed"
            if killed and pending.worker
            else " before it ran"
        )
        return TaskCancelledError(f"task {pending.name!r} was cancelled ({pending.cancelled}){how}")

    def _task_env(self, pending: _Pending) -> dict[str, str]:
        env = self._base_env()
        if self.capacity.gpus or pending.resources.env_vars:
            env = dict(env)
            if self.capacity.gpus:
                env["CUDA_VISIBLE_DEVICES"] = ",".join(pending.gpu_ids)
            env.update(pending.resources.env_vars)
        return env

    def _base_env(self) -> dict[str, str]:
        """This process's environment with the workers' PYTHONPATH; built again only when os.environ or
        sys.path changed. Callers must not modify it."""
        key = (current_environ()[0], tuple(sys.path))
        cached = self._env_cache
        if cached is not None and cached[0] == key:
            return cached[1]
        env = dict(current_environ()[1])
        # The worker imports whatever the parent could: the task may live in a test module or a script dir.
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        env["PYTHONUNBUFFERED"] = "1"
        self._env_cache = (key, env)
        return env
