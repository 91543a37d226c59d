"""LocalCluster: each task runs in a worker process (a fresh interpreter of the current environment,
kept warm and reused for later tasks).

Tasks start in submission order as soon as the machine's free cores, memory and GPUs cover what
they ask for (a later task that fits may start before an earlier one that does not yet). A task that
could never fit on this machine fails at once instead of waiting forever.

Cores: a task whose ResourceConfig asks for `cpu=n` holds n cores (at least one thread) while it
runs. A task that asks for nothing (`resources=None`) is given its share of the cores free when it
starts: those cores divided among the tasks that want them then, itself included: the tasks still
queued that ask for nothing, and the calls of the shared thread pool (`fray.cluster.threads`) that
are preparing work rather than waiting for a task (the step runner's drivers, which are about to
submit their steps). Alone, a task gets every free core. Each task's process is told its count
before the task runs (torch's intra-op threads, OMP/MKL/OpenBLAS, tokenizers' Rayon pool, zephyr's
workers: see `thread_env`), so the threads of the tasks running at once never add up to more than
the machine's cores. A variable the runner's own environment sets is left as it is.

Dispatch runs on the shared thread pool: a task that starts as it is submitted from a thread of the
pool (a step driver) is run by that thread when it next waits for the task's result, sparing a
hand-off to another thread and back; any other task goes to an idle thread of the pool.
"""

from __future__ import annotations

import collections
import concurrent.futures
import functools
import math
import os
import pickle
import signal
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
    TaskFuture,
    default_resources,
    missing_packages,
    read_outcome,
    start_worker,
)
from fray.cluster.logs import attempt_header, local_log_file, tail
from fray.cluster.resource_config import ResourceConfig
from fray.cluster.threads import Deferred, shared_pool
from fray.task_process import current_environ
from procpool.pool import Pool
from procpool.process import WorkerLostError, WorkerProcess

# What a task's process is told of its cores: intra-op threads (torch reads OMP_NUM_THREADS; the
# worker also calls torch.set_num_threads when torch is already loaded), BLAS pools, tokenizers'
# Rayon pool, and how many worker processes zephyr starts.
THREAD_VARS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "RAYON_NUM_THREADS",
    "ZEPHYR_NUM_WORKERS",
)
BLAS_VARS = ("MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
_EPS = 1e-9


@dataclass(eq=False)
class _Pending:
    name: str
    payload: bytes
    resources: ResourceConfig
    log_path: str | None
    future: TaskFuture
    asks_for_cores: bool  # its ResourceConfig was given: it holds resources.cpu, not a share
    cores: float = 0.0  # held while it runs
    threads: int = 1  # what its process is told it may use
    gpu_ids: list[str] = field(default_factory=list)
    worker: WorkerProcess | None = None  # while it runs its task; None again before the worker goes back
    finished: bool = False  # its worker is back in the pool: cancel() must not touch it
    cancelled: str | None = None  # why cancel() stopped it
    deferred: Deferred | None = None  # its dispatch, kept by the pool thread that submitted it
    kill_timer: threading.Timer | None = (
        None  # after cancel()'s SIGTERM: the SIGKILL, if it outlives the grace
    )


class LocalCluster(Cluster):
    """Runs each task in a worker process (a fresh interpreter, not a fork) of the current environment.

    `cpu`, `ram` (bytes) and `gpus` cap what running tasks may use together; each defaults to this
    machine's total. The task is cloudpickled, its stdout/stderr go to `log_path`, and its return
    value or exception comes back pickled. Workers start on first use and are reused, one task at a
    time each (so a task pays no interpreter start-up); a task that asks for GPUs or sets env_vars
    gets a worker of its own, started with that environment and ended after it. With `echo`, the
    lines a running task writes to its log are also shown on stderr, prefixed with its name.
    `cancel(future, grace_s=g)` sends a running task's worker process SIGTERM, so the task may stop
    cleanly (a training writes its checkpoint: `marin.training.stop_signals`), and SIGKILL if it is
    still running `g` seconds later (0, the default: SIGKILL at once). How cores are shared: the
    module docstring.

    A machine has no region: a task's `regions` are ignored, with one PlacementIgnoredWarning per
    cluster (experiments declared for a cluster run on a laptop unchanged). `preemptible` needs
    nothing: this machine is not a preemptible node.
    """

    def __init__(
        self,
        *,
        cpu: float | None = None,
        ram: int | None = None,
        gpus: int | None = None,
        echo: bool = False,
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
        self._pool = shared_pool()
        self._running = 0  # tasks started and not yet resolved
        self._all_done = threading.Condition(self._lock)
        self._tasks: dict[concurrent.futures.Future, _Pending] = {}  # queued or running, by future
        self._workers = Pool(max_idle=max(1, math.ceil(self.capacity.cpu)))
        self._closed = False
        self._warned_regions = False
        self._env_cache: tuple[tuple, dict[str, str], dict[int, dict[str, str]]] | None = None

    def submit(
        self,
        task: Callable[[], Any],
        *,
        name: str,
        resources: ResourceConfig | None = None,
        log_path: str | None = None,
        on_preemption: Callable[[dict[str, Any]], None] | None = None,
    ) -> concurrent.futures.Future:
        """Queue `task`; it starts in its own process once its resources are free. A local task is
        never restarted, so `on_preemption` is never called."""
        future = TaskFuture(self._pool)
        asks_for_cores = resources is not None
        resources = resources or default_resources()
        if resources.replicas > 1:  # a gang: one launcher of R local processes, holding R times the request
            task, resources = local_gang(task, resources)
        self._warn_regions(name, resources)
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
        pending = _Pending(name, payload, resources, log_path, future, asks_for_cores)
        with self._lock:
            if self._closed:
                raise RuntimeError("LocalCluster.submit after shutdown()")
            self._queue.append(pending)
            self._tasks[future] = pending
            started = self._start_what_fits()
        self._dispatch(started, submitted=pending)
        return future

    def cancel(self, future: concurrent.futures.Future, reason: str = "", *, grace_s: float = 0.0) -> None:
        """Keep a queued task from starting, or stop the worker process of a running one: SIGKILL, or
        with `grace_s` > 0 SIGTERM and SIGKILL `grace_s` seconds later (its future then fails with
        TaskCancelledError naming `reason`, unless the task handled SIGTERM and returned or raised). A
        task that has finished is left alone; a second cancel can only shorten the grace."""
        with self._lock:
            pending = self._tasks.get(future)
            if pending is None or pending.finished:
                return
            if pending.cancelled is not None:  # already told to stop: a shorter grace still applies
                if grace_s <= 0 and pending.worker is not None:
                    pending.worker.kill()
                return
            pending.cancelled = reason or "cancelled"
            queued = pending in self._queue
            if queued:
                self._queue.remove(pending)
                del self._tasks[future]
            elif pending.worker is not None:  # else it is between start and take(): _run sees `cancelled`
                # Under the lock: _run hands the worker back to the pool (where the next task may
                # take it) only after marking the task finished under this lock.
                self._stop_worker(pending, grace_s)
        if queued:
            future.cancel()  # outside the lock: it runs done callbacks, which may call back into us

    def _stop_worker(self, pending: _Pending, grace_s: float) -> None:
        """SIGTERM a cancelled task's worker and SIGKILL it after `grace_s` (under self._lock). The
        worker is not reused afterwards, so the SIGKILL can only reach this task."""
        worker = pending.worker
        if grace_s <= 0:
            worker.kill()
            return
        worker.terminate()
        pending.kill_timer = threading.Timer(grace_s, self._kill_after_grace, (pending, worker))
        pending.kill_timer.daemon = True
        pending.kill_timer.start()

    def _kill_after_grace(self, pending: _Pending, worker: WorkerProcess) -> None:
        with self._lock:
            if pending.worker is worker and not pending.finished:
                worker.kill()

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
        with self._lock:
            started = [p for p in self._tasks.values() if p.deferred is not None]
            if kill_running:
                for pending in started:
                    pending.cancelled = pending.cancelled or "the cluster shut down"
        for pending in started:  # a submitter that never asked for its result: dispatched here
            self._pool.run_now(pending.deferred)
        if kill_running:
            self._workers.kill_busy()
        with self._lock:
            while self._running:
                self._all_done.wait()
        self._workers.close()

    def _warn_regions(self, name: str, resources: ResourceConfig) -> None:
        if resources.regions and not self._warned_regions:
            self._warned_regions = True
            warnings.warn(
                f"LocalCluster ignores regions={resources.regions!r} of task {name!r} (and of every later "
                "task): this machine has no region; regions apply on a RayCluster",
                PlacementIgnoredWarning,
                stacklevel=3,
            )

    # Placement: under self._lock.

    def _start_what_fits(self) -> list[_Pending]:
        """Start the queued tasks that fit (their resources are taken); returns them, to dispatch."""
        started = []
        sharing = sum(1 for p in self._queue if not p.asks_for_cores)
        others = None  # the pool's calls still preparing work, counted once, when first needed
        for pending in list(self._queue):
            if pending.asks_for_cores:
                cores = pending.resources.cpu if pending.resources.cpu <= self._free_cpu + _EPS else None
            else:
                if others is None:
                    others = self._pool.working()
                cores = self._share(sharing + others)
                sharing -= 1
            res = pending.resources
            if cores is None or (res.ram or 0) > self._free_ram or res.gpu_count > len(self._free_gpus):
                continue
            self._queue.remove(pending)
            if not pending.future.set_running_or_notify_cancel():
                self._tasks.pop(pending.future, None)
                continue
            self._take(pending, cores)
            started.append(pending)
        return started

    def _share(self, wanting: int) -> float | None:
        """The whole cores a task that asks for none gets when `wanting` tasks (itself included) want
        the free ones; None when not one core is free."""
        free = math.floor(self._free_cpu + _EPS)
        return None if free < 1 else float(max(1, free // max(1, wanting)))

    def _take(self, pending: _Pending, cores: float) -> None:
        pending.cores = cores
        pending.threads = max(1, math.ceil(cores - _EPS))
        self._free_cpu -= cores
        self._free_ram -= pending.resources.ram or 0
        pending.gpu_ids = [self._free_gpus.pop(0) for _ in range(pending.resources.gpu_count)]
        self._running += 1

    def _release(self, pending: _Pending) -> None:
        with self._lock:
            self._free_cpu += pending.cores
            self._free_ram += pending.resources.ram or 0
            self._free_gpus.extend(pending.gpu_ids)
            started = [] if self._closed else self._start_what_fits()
        self._dispatch(started)

    def _dispatch(self, started: list[_Pending], submitted: _Pending | None = None) -> None:
        """Hand started tasks to the shared pool; the one being submitted stays with its submitter's
        thread when that is a thread of the pool (its future's result() runs it)."""
        for pending in started:
            if pending is submitted:
                pending.deferred = pending.future.dispatch = self._pool.defer(self._run, pending)
            else:
                self._pool.submit(self._run, pending)

    # Running a task: on a thread of the pool.

    def _run(self, pending: _Pending) -> None:
        # A GPU task sets CUDA_VISIBLE_DEVICES, and env_vars may be read at import time (threads, caches):
        # such a task needs an interpreter that starts with its environment.
        dedicated = bool(pending.gpu_ids or pending.resources.env_vars)
        env = self._task_env(pending)
        try:
            with local_log_file(pending.log_path) as log_file:
                worker = self._workers.take(functools.partial(start_worker, env), reuse=not dedicated)
                with self._lock:
                    pending.worker = worker
                try:
                    if pending.cancelled is not None:
                        outcome = self._cancelled(pending, killed=False)
                    else:
                        with self._pool.waiting():
                            outcome = self._run_on(worker, pending, log_file, env)
                finally:
                    with self._lock:  # from now on cancel() leaves this worker (and its next task) alone
                        pending.finished = True
                        pending.worker = None
                        stopped = pending.cancelled is not None  # it may have got SIGTERM: never reused
                        if pending.kill_timer is not None:
                            pending.kill_timer.cancel()
                    # A stopped task's worker has nothing left to finish: it is killed, not waited for
                    # (its interpreter's exit could wait on threads its task left behind).
                    self._workers.give_back(
                        worker, reusable=not (dedicated or stopped), timeout=0.0 if stopped else 10.0
                    )
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
            return self._lost(worker, pending, log_file)
        finally:
            if echo:
                echo.close()
        return read_outcome(reply, pending.name)

    def _lost(self, worker: WorkerProcess, pending: _Pending, log_file: str) -> BaseException:
        """Why a task's process ended without a reply: cancelled by us, killed from outside (a signal:
        TaskLostError, which a runner retries), or ended by the task's own code (an exit code)."""
        if pending.cancelled is not None:
            return self._cancelled(pending, killed=True)
        code = worker.exit_code()
        where = f"task {pending.name!r}: its process (pid {worker.pid})"
        log = f"last lines of its log {pending.log_path}:\n{tail(log_file)}"
        if code is not None and code >= 0:
            return RemoteTaskError(f"{where} exited with code {code} before reporting a result; {log}")
        how = f"was killed by {signal.Signals(-code).name}" if code is not None else "vanished"
        return TaskLostError(
            f"{where} {how} (exited with code {code}) before reporting a result (killed from outside, "
            f"or out of memory); {log}"
        )

    @staticmethod
    def _cancelled(pending: _Pending, *, killed: bool) -> TaskCancelledError:
        how = (
            f": its process (pid {pending.worker.pid}) was stopped (SIGTERM, then killed if still running)"
            if killed and pending.worker
            else " before it ran"
        )
        return TaskCancelledError(f"task {pending.name!r} was cancelled ({pending.cancelled}){how}")

    def _task_env(self, pending: _Pending) -> dict[str, str]:
        env = self._base_env(pending.threads)
        if self.capacity.gpus or pending.resources.env_vars:
            env = dict(env)
            if self.capacity.gpus:
                env["CUDA_VISIBLE_DEVICES"] = ",".join(pending.gpu_ids)
            env.update(pending.resources.env_vars)
        return env

    def _base_env(self, threads: int) -> dict[str, str]:
        """This process's environment with the workers' PYTHONPATH and the thread counts of a task
        given `threads` cores; built again only when os.environ or sys.path changed (one dict per
        count, so a worker is sent its environment again only when its count changed). Callers must
        not modify it."""
        key = (current_environ()[0], tuple(sys.path))
        cached = self._env_cache
        if cached is None or cached[0] != key:
            env = dict(current_environ()[1])
            # The worker imports whatever the parent could: the task may live in a test module or a script dir.
            env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
            env["PYTHONUNBUFFERED"] = "1"
            cached = self._env_cache = (key, env, {})
        by_threads = cached[2]
        if threads not in by_threads:
            by_threads[threads] = {**cached[1], **thread_env(threads, cached[1])}
        return by_threads[threads]


def thread_env(threads: int, environ: dict[str, str]) -> dict[str, str]:
    """The variables that tell a task's process it may use `threads` cores (`THREAD_VARS`), less
    those `environ` (the runner's environment) sets itself. The BLAS pools follow the runner's own
    OMP_NUM_THREADS when it sets one: told more threads than torch's, MKL spins them beside every
    small matrix product (a nano training under `OMP_NUM_THREADS=1` ran ten times slower)."""
    told = {name: str(threads) for name in THREAD_VARS if name not in environ}
    if "OMP_NUM_THREADS" in environ:
        for name in BLAS_VARS:
            if name in told:
                told[name] = environ["OMP_NUM_THREADS"]
    return told
