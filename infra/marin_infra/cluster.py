"""The GKE Standard cluster and its node pools: CPU (always), spot CPU and GPU (when configured).

Nodes carry the Ray node labels fray places steps by (fray.cluster.placement) as Kubernetes labels
too, so `kubectl get nodes -L ray.io/market-type` shows what Ray sees. The spot pool is tainted so only
pods that tolerate preemption (the RayCluster's spot group) land there; GKE taints GPU nodes itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from fray.cluster.placement import MARKET_TYPE_LABEL, REGION_LABEL
from fray.kuberay import GKE_SPOT_LABEL
from marin_infra.settings import Pool, Settings

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"  # access is IAM's job, not scopes'


@dataclass(frozen=True)
class Gke:
    """The cluster and its pools (the pools are what the Kubernetes resources must wait for)."""

    cluster: gcp.container.Cluster
    pools: tuple[gcp.container.NodePool, ...]


def _node_pool(
    name: str,
    settings: Settings,
    cluster: gcp.container.Cluster,
    pool: Pool,
    node_account: pulumi.Input[str],
    *,
    spot: bool = False,
    gpu: bool = False,
    opts: pulumi.ResourceOptions,
) -> gcp.container.NodePool:
    taints = (
        [gcp.container.NodePoolNodeConfigTaintArgs(key=GKE_SPOT_LABEL, value="true", effect="NO_SCHEDULE")]
        if spot
        else []
    )
    accelerators = (
        [
            gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
                type=settings.gpu_type,
                count=settings.gpu_count,
                gpu_driver_installation_config=gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                    gpu_driver_version="LATEST"
                ),
            )
        ]
        if gpu
        else []
    )
    return gcp.container.NodePool(
        name,
        name=name,
        project=settings.project,
        location=settings.region,
        cluster=cluster.name,
        autoscaling=gcp.container.NodePoolAutoscalingArgs(
            total_min_node_count=pool.min_nodes, total_max_node_count=pool.max_nodes, location_policy="ANY"
        ),
        # Per zone, in a regional cluster; the autoscaler then keeps the total within [min, max].
        initial_node_count=pool.min_nodes or None,
        node_config=gcp.container.NodePoolNodeConfigArgs(
            machine_type=pool.machine_type,
            spot=spot,
            service_account=node_account,
            oauth_scopes=[CLOUD_PLATFORM_SCOPE],
            labels={REGION_LABEL: settings.region, MARKET_TYPE_LABEL: "spot" if spot else "on-demand"},
            taints=taints,
            guest_accelerators=accelerators,
            # Pods get their own identity (Workload Identity), never the node's.
            workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(
                mode="GKE_METADATA"
            ),
        ),
        management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
        opts=opts,
    )


def gke(settings: Settings, node_account: gcp.serviceaccount.Account, opts: pulumi.ResourceOptions) -> Gke:
    """A regional Standard cluster with Workload Identity, and one node pool per configured pool."""
    cluster = gcp.container.Cluster(
        "marin-gke",
        name=settings.cluster_name,
        project=settings.project,
        location=settings.region,
        node_locations=list(settings.zones) or None,
        # GKE must create a default pool; it is removed at once in favour of the pools below.
        remove_default_node_pool=True,
        initial_node_count=1,
        node_config=gcp.container.ClusterNodeConfigArgs(
            service_account=node_account.email, oauth_scopes=[CLOUD_PLATFORM_SCOPE]
        ),
        workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(
            workload_pool=f"{settings.project}.svc.id.goog"
        ),
        release_channel=gcp.container.ClusterReleaseChannelArgs(channel="REGULAR"),
        # So that `pulumi destroy` can remove it; the research outputs live in the bucket, not here.
        deletion_protection=False,
        opts=opts,
    )
    pool_opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(parent=cluster))
    pools = [_node_pool("cpu", settings, cluster, settings.cpu_pool, node_account.email, opts=pool_opts)]
    if settings.spot_pool is not None:
        pools.append(
            _node_pool(
                "cpu-spot",
                settings,
                cluster,
                settings.spot_pool,
                node_account.email,
                spot=True,
                opts=pool_opts,
            )
        )
    if settings.gpu_pool is not None:
        pools.append(
            _node_pool(
                settings.gpu_group_name,
                settings,
                cluster,
                settings.gpu_pool,
                node_account.email,
                gpu=True,
                opts=pool_opts,
            )
        )
    return Gke(cluster=cluster, pools=tuple(pools))
