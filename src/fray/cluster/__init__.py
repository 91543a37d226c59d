"""Resource requests and clusters. Importing this never imports ray (RayCluster imports it when built).

The Cluster interface, the resource types and the errors load at once; each cluster loads on the
first use of its name, so that importing the engine (`marin.execution`, which needs only the
interface) stays fast and a cached run never loads the machinery that runs steps.
"""

import importlib
from typing import TYPE_CHECKING, Any

from fray.cluster.base import Cluster, ThreadCluster
from fray.cluster.errors import (
    FrayError,
    PlacementIgnoredWarning,
    RemoteTaskError,
    ResourceConfigError,
    ResourcesUnavailableError,
    TaskCancelledError,
    TaskLostError,
)
from fray.cluster.resource_config import CpuConfig, GpuConfig, ResourceConfig, TpuConfig

if TYPE_CHECKING:
    from fray.cluster.gang import run_as_local_gang
    from fray.cluster.local_cluster import LocalCluster
    from fray.cluster.ray_cluster import RayCluster

_LAZY = {
    "fray.cluster.gang": ("run_as_local_gang",),
    "fray.cluster.local_cluster": ("LocalCluster",),
    "fray.cluster.ray_cluster": ("RayCluster",),
}
_LAZY_MODULE = {name: module for module, names in _LAZY.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _LAZY_MODULE.get(name)
    if module is None:
        raise AttributeError(f"module 'fray.cluster' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "Cluster",
    "CpuConfig",
    "FrayError",
    "GpuConfig",
    "LocalCluster",
    "PlacementIgnoredWarning",
    "RayCluster",
    "RemoteTaskError",
    "ResourceConfig",
    "ResourceConfigError",
    "ResourcesUnavailableError",
    "TaskCancelledError",
    "TaskLostError",
    "ThreadCluster",
    "TpuConfig",
    "run_as_local_gang",
]
