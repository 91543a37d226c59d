"""The Cluster interface: a place that runs a step's task on the resources it asked for."""

from __future__ import annotations

import abc
import concurrent.futures
from collections.abc import Callable
from typing import Any

from fray.cluster.resource_config import ResourceConfig


class Cluster(abc.ABC):
    """Runs zero-argument picklable tasks and reports each outcome through a Future.

    The step runner owns ordering, leases and records; a cluster only decides where and when a task
    runs, within the resources it has.
    """

    @abc.abstractmethod
    def submit(
        self,
        task: Callable[[], Any],
        *,
        name: str,
        resources: ResourceConfig | None = None,
        log_path: str | None = None,
        new_log: bool = False,
    ) -> concurrent.futures.Future:
        """Start `task`; the future resolves to its return value or raises its exception.

        `log_path`, when given, is a file (any fsspec URL) that receives the task's stdout/stderr,
        appended to what is there. `new_log` says the caller knows nothing is there yet, so a
        cluster that must fetch a remote log to append to it can skip that round trip.
        """

    def submit_inline(
        self,
        task: Callable[[], Any],
        *,
        name: str,
        resources: ResourceConfig | None = None,
        log_path: str | None = None,
        new_log: bool = False,
    ) -> concurrent.futures.Future:
        """As `submit`, for a caller that next waits for the future's `result()` in this same thread:
        a cluster may then dispatch the task inside that call (LocalCluster does, sparing a hand-off
        to a dispatch thread and back). This default is `submit`."""
        return self.submit(task, name=name, resources=resources, log_path=log_path, new_log=new_log)

    def cancel(self, future: concurrent.futures.Future, reason: str = "") -> None:
        """Stop the task behind `future` (one this cluster returned); `reason` goes into its error.

        A queued task never starts. A running task is killed where the cluster can kill it (its
        process on a LocalCluster, its Ray worker on a RayCluster), and its future fails with
        `TaskCancelledError`. This default can only keep a task that has not started from starting.
        """
        future.cancel()

    def shutdown(self) -> None:  # noqa: B027 (a cluster that holds nothing has nothing to release)
        """Release whatever the cluster holds (processes, connections)."""


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
        new_log: bool = False,
    ) -> concurrent.futures.Future:
        """Run `task` on a thread of this process; its output is not captured (`log_path` is ignored)."""
        return self._pool.submit(task)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)
