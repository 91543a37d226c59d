"""The `processes` backend: a pool of long-lived local worker processes, one task each at a time.

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

import contextlib
import gc
import multiprocessing as mp
import pickle
import signal
import sys
import threading
from multiprocessing.connection import Connection, wait

from zephyr.backends.base import Backend
from zephyr.worker import ShardResult, TaskFailure, run_payload


def _worker_main(conn: Connection) -> None:
    """Run payloads sent over `conn` until an empty message (or a closed pipe) says stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle
    # What a forked worker inherits stays out of its collections: a collection that walked those
    # objects would write to (and so copy) every page of the driver's heap.
    gc.freeze()
    while True:
        try:
            payload = conn.recv_bytes()
        except (EOFError, OSError):
            return
        if not payload:
            return
        result = run_payload(payload)
        try:
            data = pickle.dumps(result, protocol=5)
        except Exception as e:
            unpicklable = TaskFailure(
                type(e).__name__, f"the shard's result cannot be pickled: {e}", None, None, retryable=False
            )
            data = pickle.dumps(ShardResult(result.stage, result.shard, failure=unpicklable), protocol=5)
        conn.send_bytes(data)


# Threads that hold no lock a forked child could need: fray's worker watching for its parent's death.
FORK_SAFE_THREADS = frozenset({"fray-parent-watch"})


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


class _Worker:
    def __init__(self, ctx) -> None:
        self.conn, child = ctx.Pipe(duplex=True)
        self.process = ctx.Process(target=_worker_main, args=(child,), daemon=True, name="zephyr-worker")
        self.process.start()
        child.close()
        self.task_id: int | None = None


class ProcessBackend(Backend):
    """Up to `num_workers` worker processes, started on demand (fork, forkserver or spawn: see the module doc)."""

    def __init__(self, num_workers: int, start_method: str | None = None):
        if start_method is None:
            start_method = default_start_method()
        self._ctx = mp.get_context(start_method)
        if start_method == "forkserver":
            self._ctx.set_forkserver_preload(["zephyr.worker"])
        self._max_workers = num_workers
        self._workers: list[_Worker] = []

    def free_slots(self) -> int:
        return self._max_workers - sum(w.task_id is not None for w in self._workers)

    def submit(self, task_id: int, payload: bytes) -> None:
        worker = next((w for w in self._workers if w.task_id is None), None)
        if worker is None:
            worker = _Worker(self._ctx)
            self._workers.append(worker)
        worker.task_id = task_id
        try:
            worker.conn.send_bytes(payload)
        except OSError:
            pass  # the worker is already dead; wait() reports it and the task is retried

    def wait(self) -> list[tuple[int, ShardResult]]:
        busy = [w for w in self._workers if w.task_id is not None]
        by_handle = {}
        for w in busy:
            by_handle[w.conn] = w
            by_handle[w.process.sentinel] = w
        finished = []
        for handle in wait(list(by_handle)):
            worker = by_handle[handle]
            if worker.task_id is None:
                continue  # both its pipe and its sentinel were ready; already handled
            task_id, worker.task_id = worker.task_id, None
            result = self._receive(worker)
            if result is None:
                result = self._bury(worker)
            finished.append((task_id, result))
        return finished

    def _receive(self, worker: _Worker) -> ShardResult | None:
        try:
            if worker.conn.poll():
                return pickle.loads(worker.conn.recv_bytes())
        except (EOFError, OSError):
            pass
        return None

    def _bury(self, worker: _Worker) -> ShardResult:
        """Reap a worker that died mid-task and describe its death as a retryable failure."""
        worker.process.join(timeout=5)
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
        worker.conn.close()
        self._workers.remove(worker)
        code = worker.process.exitcode
        failure = TaskFailure(
            "WorkerDied",
            f"worker process {worker.process.pid} exited with code {code} while running the shard",
            None,
            None,
        )
        return ShardResult(-1, -1, failure=failure)

    def close(self) -> None:
        for worker in self._workers:
            with contextlib.suppress(OSError):
                if worker.task_id is None:
                    worker.conn.send_bytes(b"")
        for worker in self._workers:
            worker.process.join(timeout=2 if worker.task_id is None else 0)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            worker.conn.close()
        self._workers = []
