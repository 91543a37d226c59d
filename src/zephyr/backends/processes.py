"""The `processes` backend: a procpool of long-lived local worker processes, one task each at a time
(the same worker pool fray's LocalCluster runs on, with zephyr's handler and start method).

Unlike concurrent.futures.ProcessPoolExecutor, a worker that dies (os._exit, a segfault, the OOM
killer) breaks only the task it was running: that task is reported as a retryable failure and a
fresh worker takes its place.

Workers are forked when the driver runs no other Python thread: a fork starts in about a millisecond
with the driver's modules already imported, where a forkserver costs a fresh interpreter and its
imports (~0.15 s, as long as a 200,000-record pipeline takes on one core) and every worker then
imports the task's modules again. A driver with other Python threads (a Ray worker, a thread pool)
gets forkserver workers, since a fork copies locks those threads may hold. Native pools are no bar,
as with the standard library's fork default: OpenBLAS (numpy) re-initialises itself in a forked
child and Hugging Face tokenizers turn their parallelism off there. fray's parent-death watch only
sleeps and reads getppid, so a fray worker forks too. A driver that has initialised CUDA never
forks: a forked child cannot use CUDA again.
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import pickle
import signal
import sys
import threading

from procpool.lifeline import FORK_SAFE
from procpool.pool import Pool
from procpool.process import WorkerLostError, WorkerProcess, ready
from zephyr.backends.base import Backend
from zephyr.worker import ShardResult, TaskFailure, run_payload


def setup_worker() -> None:
    """What a worker does once, before its first task."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle
    # What a forked worker inherits stays out of its collections: a collection that walked those
    # objects would write to (and so copy) every page of the driver's heap.
    gc.freeze()


def handle(payload: bytes) -> bytes:
    """A worker's answer to one pickled ShardTask: the pickled ShardResult."""
    result = run_payload(payload)
    try:
        return pickle.dumps(result, protocol=5)
    except Exception as e:
        unpicklable = TaskFailure(
            type(e).__name__, f"the shard's result cannot be pickled: {e}", None, None, retryable=False
        )
        return pickle.dumps(ShardResult(result.stage, result.shard, failure=unpicklable), protocol=5)


# Threads that hold no lock a forked child could need: procpool's own (the spawner, the parent watch).
FORK_SAFE_THREADS = FORK_SAFE


def default_start_method() -> str:
    """'fork' when no other Python thread runs here (bar FORK_SAFE_THREADS) and CUDA is not
    initialised, else 'forkserver' ('spawn' where neither exists)."""
    methods = mp.get_all_start_methods()
    main = threading.main_thread()
    only_safe_threads = all(t is main or t.name in FORK_SAFE_THREADS for t in threading.enumerate())
    if "fork" in methods and only_safe_threads and not _cuda_initialized():
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"


def _cuda_initialized() -> bool:
    torch = sys.modules.get("torch")  # never imported here: a driver without torch has no CUDA context
    try:
        return bool(torch is not None and torch.cuda.is_initialized())
    except Exception:  # noqa: BLE001 - a broken or partial torch: assume the worst
        return True


class ProcessBackend(Backend):
    """Up to `num_workers` worker processes, started on demand (fork, forkserver or spawn: see the module doc)."""

    def __init__(self, num_workers: int, start_method: str | None = None):
        if start_method is None:
            start_method = default_start_method()
        if start_method == "forkserver":
            mp.get_context("forkserver").set_forkserver_preload(["zephyr.worker"])
        self._start_method = start_method
        self._max_workers = num_workers
        self._pool = Pool(max_idle=num_workers)
        self._running: dict[WorkerProcess, int] = {}  # busy worker -> its task id

    def _start_worker(self) -> WorkerProcess:
        return WorkerProcess(
            "zephyr.backends.processes:handle",
            start=self._start_method,
            setup="zephyr.backends.processes:setup_worker",
        )

    def free_slots(self) -> int:
        return self._max_workers - len(self._running)

    def submit(self, task_id: int, payload: bytes) -> None:
        worker = self._pool.take(self._start_worker)
        self._running[worker] = task_id
        try:
            worker.send(payload)
        except WorkerLostError:
            pass  # the worker is already dead; wait() reports it and the task is retried

    def wait(self) -> list[tuple[int, ShardResult]]:
        finished = []
        for worker in ready(self._running):
            try:
                reply = worker.poll_reply()
            except WorkerLostError:
                finished.append((self._running.pop(worker), self._bury(worker)))
                continue
            if reply is not None:
                finished.append((self._running.pop(worker), pickle.loads(reply)))
                self._pool.give_back(worker)
        return finished

    def _bury(self, worker: WorkerProcess) -> ShardResult:
        """Reap a worker that died mid-task and describe its death as a retryable failure."""
        self._pool.give_back(worker, reusable=False, timeout=5)
        failure = TaskFailure(
            "WorkerDied",
            f"worker process {worker.pid} exited with code {worker.exit_code(0)} while running the shard",
            None,
            None,
        )
        return ShardResult(-1, -1, failure=failure)

    def close(self) -> None:
        running, self._running = list(self._running), {}
        for worker in running:  # a task still running when the job ends (a failure elsewhere) is stopped
            worker.kill()
            self._pool.give_back(worker, reusable=False, timeout=0)
        self._pool.close()
