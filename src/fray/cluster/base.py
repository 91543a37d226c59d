"""The Cluster interface: a place that runs a step's task on the resources it asked for."""

from __future__ import annotations

import abc
import concurrent.futures
from collections.abc import Callable
from typing import Any

from fray.cluster.resource_config import ResourceConfig


class Cluster(abc.ABC):
    """Runs zero-argument picklable tasks and reports each outcome through a Future.

    This is the whole interface a new backend implements: `submit` (required), `cancel` and
    `shutdown` (defaults below). Keep it so: a backend's own machinery (LocalCluster's warm workers,
    how it dispatches and writes logs; RayCluster's retries) stays inside the backend, and the step
    runner, which owns ordering, leases and records, never asks a cluster for more than this.

    The errors a future may fail with say who is to blame: the task's own exception (the step's code
    raised; re-raised as itself), `TaskLostError` (its process or node was lost: killed from outside,
    preempted, out of memory; a runner retries such a step), `TaskCancelledError` (`cancel`),
    `ResourcesUnavailableError` (it can never run here) and `RemoteTaskError` (it failed in a way
    that could not travel back as its own exception).
    """

    @abc.abstractmethod
    def submit(
        self,
        task: Callable[[], Any],
        *,
        name: str,
        resources: ResourceConfig | None = None,
        log_path: str | None = None,
        on_preemption: Callable[[dict[str, Any]], None] | None = None,
    ) -> concurrent.futures.Future:
        """Start `task`; the future resolves to its return value or raises its exception.

        `resources=None` asks for nothing in particular (the cluster's default placement).
        `log_path`, when given, is a file (any fsspec URL) that receives the task's stdout/stderr,
        appended to what is there. `on_preemption`, when given, is called with a record
        (`{"replica", "node", "retry", "of", "error"}`) each time a lost replica made the cluster
        start a multi-replica task again; a cluster that never restarts a running task never calls it.
        """

    def cancel(self, future: concurrent.futures.Future, reason: str = "", *, grace_s: float = 0.0) -> None:
        """Stop the task behind `future` (one this cluster returned); `reason` goes into its error.

        A queued task never starts. A running task is stopped where the cluster can stop it, and its
        future fails with `TaskCancelledError`, unless the task, told to stop, returned or raised on
        its own. With `grace_s` > 0 it is first told to stop and given that long to end by itself (a
        training finishes its step and writes a checkpoint: a LocalCluster sends its process SIGTERM,
        a RayCluster raises KeyboardInterrupt in it) and is killed only after; with 0 it is killed at
        once (its Ray worker, its LocalCluster process: SIGKILL). Either way the call returns at
        once. This default can only keep a task that has not started from starting.
        """
        future.cancel()

    def shutdown(self) -> None:  # noqa: B027 (a cluster that holds nothing has nothing to release)
        """Release whatever the cluster holds (processes, connections), once nothing more is submitted."""


class ThreadCluster(Cluster):
    """Runs tasks on threads of the current process: the cheapest placement, for tests and debugging.

    A running thread cannot be stopped: `cancel` only keeps queued tasks from starting, and a
    cancelled running task runs to its end (the step runner then records nothing of it).
    """

    def __init__(self, max_workers: int = 32):
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix="marin-step"
        )

    def submit(
        self,
        task: Callable[[], Any],
        *,
        name: str,
        resources: ResourceConfig | None = None,
        log_path: str | None = None,
        on_preemption: Callable[[dict[str, Any]], None] | None = None,
    ) -> concurrent.futures.Future:
        """Run `task` on a thread of this process; its output is not captured (`log_path` is ignored)."""
        return self._pool.submit(task)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)
