"""Exception types of fray. Each message names the field, task or resource and says what to do.

fray sits below `marin.execution` (which imports it), so these do not subclass `MarinError`.
"""

from __future__ import annotations


class FrayError(Exception):
    """Base class of every error fray raises on purpose."""


class ResourceConfigError(FrayError, ValueError):
    """A ResourceConfig is declared wrongly: a size that is not a size, a negative count, a bad device."""


class ResourcesUnavailableError(FrayError):
    """A task asks for more than the cluster has (e.g. a GPU on a CPU-only cluster): it could never start."""


class TaskLostError(FrayError):
    """The process running a task died (killed, preempted, out of memory) and no retry was left."""


class TaskCancelledError(FrayError):
    """The task was cancelled through `Cluster.cancel` (e.g. its step lost its lease); a running one was killed."""


class RemoteTaskError(FrayError):
    """A task raised an exception that could not be sent back as itself; holds its formatted traceback."""


class PlacementIgnoredWarning(UserWarning):
    """A cluster cannot honour where a task asked to run (e.g. `regions` on a LocalCluster) and runs it anyway."""
