"""Resource requests and clusters. Importing this never imports ray."""

from fray.cluster.base import Cluster, ThreadCluster
from fray.cluster.resource_config import ResourceConfig

__all__ = ["Cluster", "ResourceConfig", "ThreadCluster"]
