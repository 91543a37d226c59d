"""Resource requests and clusters. Importing this never imports ray (RayCluster imports it when built)."""

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
from fray.cluster.gang import run_as_local_gang
from fray.cluster.local_cluster import LocalCluster
from fray.cluster.ray_cluster import RayCluster
from fray.cluster.resource_config import CpuConfig, GpuConfig, ResourceConfig, TpuConfig

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
