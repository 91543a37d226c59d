"""The pieces of one LocalCluster task: its future (which may dispatch it), its worker process, the
packages it needs, and how its outcome reads back."""

from __future__ import annotations

import concurrent.futures
import functools
from typing import Any

import cloudpickle

from fray.cluster.errors import RemoteTaskError
from fray.cluster.resource_config import ResourceConfig
from fray.cluster.threads import Deferred, ThreadPool
from procpool.process import WorkerProcess


class TaskFuture(concurrent.futures.Future):
    """A LocalCluster task's future. When the task started as it was submitted from a thread of the
    shared pool, its dispatch is kept for that thread (`dispatch`): `result()` and `exception()`
    there run it first, in the calling thread. Waiting counts as the pool's `waiting()`."""

    def __init__(self, pool: ThreadPool) -> None:
        super().__init__()
        self.dispatch: Deferred | None = None
        self._pool = pool

    def result(self, timeout: float | None = None) -> Any:
        if self.dispatch is not None:
            self._pool.run_now(self.dispatch)
        with self._pool.waiting():
            return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if self.dispatch is not None:
            self._pool.run_now(self.dispatch)
        with self._pool.waiting():
            return super().exception(timeout)


@functools.cache
def default_resources() -> ResourceConfig:
    """One core: what a task that asks for nothing gets (built once: a ResourceConfig validates itself)."""
    return ResourceConfig.with_cpu()


def start_worker(env: dict[str, str]) -> WorkerProcess:
    """A warm worker: a fresh interpreter (never a fork: the caller runs threads) that dies the
    moment this process does (`procpool.lifeline`)."""
    return WorkerProcess("fray.task_process:handle", start="exec", env=env)


def read_outcome(reply: bytes, name: str) -> tuple[Any] | BaseException:
    """(value,) for a task that returned, or the exception to raise in its place."""
    try:
        outcome = cloudpickle.loads(reply)
    except Exception as exc:  # noqa: BLE001 - e.g. an exception class the parent cannot import
        return RemoteTaskError(f"task {name!r}: its result could not be read back: {exc}")
    if outcome[0] == "ok":
        return (outcome[1],)
    _, exc, formatted = outcome
    if exc is None:
        return RemoteTaskError(f"task {name!r} failed:\n{formatted}")
    exc.add_note(f"raised in the task's process (task {name!r}):\n{formatted}")
    return exc


def missing_packages(resources: ResourceConfig) -> str | None:
    """Why the current environment lacks a package the task asks for, or None when it has them all."""
    if not resources.pip_packages:
        return None
    import importlib.metadata  # lazy, with packaging: most tasks ask for no package, and both are slow to import

    from packaging.requirements import Requirement

    for spec in resources.pip_packages:
        req = Requirement(spec)
        try:
            version = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            return (
                f"it needs {spec!r}, which is not installed here; "
                f"LocalCluster uses this environment: pip install '{spec}'"
            )
        if req.specifier and not req.specifier.contains(version, prereleases=True):
            return f"it needs {spec!r} and this environment has {req.name} {version}: pip install '{spec}'"
    return None
