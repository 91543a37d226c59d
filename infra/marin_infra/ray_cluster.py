"""Ray on the GKE cluster: the KubeRay operator (Helm) and marin's RayCluster from fray.kuberay.

The RayCluster is `fray.kuberay.raycluster_manifest` of a spec built from the stack's pools: the
generator deploy/kuberay-raycluster.yaml is rendered by, so the two cannot drift apart.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from fray.kuberay import RayClusterSpec, WorkerGroup, raycluster_manifest
from marin_infra.identity import POD_NAMESPACE, POD_SERVICE_ACCOUNT, WORKLOAD_IDENTITY_ANNOTATION
from marin_infra.settings import Pool, Settings

KUBERAY_CHART = "kuberay-operator"
KUBERAY_REPO = "https://ray-project.github.io/kuberay-helm/"
KUBERAY_NAMESPACE = "kuberay-system"


def _group(name: str, pool: Pool, *, gpus: int = 0, spot: bool = False) -> WorkerGroup:
    return WorkerGroup(
        name,
        cpu=pool.ray_cpu,
        memory=pool.ray_memory,
        replicas=pool.replicas,
        max_replicas=pool.max_nodes,
        gpus=gpus,
        spot=spot,
    )


def raycluster_spec(settings: Settings, image: str) -> RayClusterSpec:
    """The RayCluster the stack runs: one worker group per node pool, one Ray pod per node."""
    groups = [_group("cpu", settings.cpu_pool)]
    if settings.spot_pool is not None:
        groups.append(_group("cpu-spot", settings.spot_pool, spot=True))
    if settings.gpu_pool is not None:
        groups.append(_group(settings.gpu_group_name, settings.gpu_pool, gpus=settings.gpu_count))
    return RayClusterSpec(
        image=image,
        region=settings.region,
        namespace=POD_NAMESPACE,
        service_account=POD_SERVICE_ACCOUNT,
        groups=tuple(groups),
    )


def kubeconfig(cluster: gcp.container.Cluster) -> pulumi.Output[str]:
    """A kubeconfig for the cluster that authenticates with gcloud's GKE plugin (no stored credential)."""

    def render(args: list) -> str:
        name, endpoint, ca = args
        return f"""apiVersion: v1
kind: Config
clusters:
- name: {name}
  cluster:
    server: https://{endpoint}
    certificate-authority-data: {ca}
contexts:
- name: {name}
  context: {{cluster: {name}, user: {name}}}
current-context: {name}
users:
- name: {name}
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: gke-gcloud-auth-plugin
      provideClusterInfo: true
"""

    return pulumi.Output.all(
        cluster.name, cluster.endpoint, cluster.master_auth.cluster_ca_certificate
    ).apply(render)


def ray_on_gke(
    settings: Settings,
    cluster: gcp.container.Cluster,
    pools: tuple[gcp.container.NodePool, ...],
    worker_email: pulumi.Output[str],
    image: str,
) -> pulumi.ResourceOptions:
    """The namespace, the pods' service account, the KubeRay operator and the RayCluster.

    Returns the options for further Kubernetes resources whose pods run as marin-worker.
    """
    provider = k8s.Provider(
        "gke", kubeconfig=kubeconfig(cluster), opts=pulumi.ResourceOptions(depends_on=list(pools))
    )
    opts = pulumi.ResourceOptions(provider=provider)
    namespace = k8s.core.v1.Namespace("marin", metadata={"name": POD_NAMESPACE}, opts=opts)
    account = k8s.core.v1.ServiceAccount(
        POD_SERVICE_ACCOUNT,
        metadata={
            "name": POD_SERVICE_ACCOUNT,
            "namespace": POD_NAMESPACE,
            "annotations": {WORKLOAD_IDENTITY_ANNOTATION: worker_email},
        },
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[namespace])),
    )
    operator = k8s.helm.v3.Release(
        "kuberay-operator",
        name="kuberay-operator",
        chart=KUBERAY_CHART,
        version=settings.kuberay_version,
        repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=KUBERAY_REPO),
        namespace=KUBERAY_NAMESPACE,
        create_namespace=True,
        opts=opts,
    )
    manifest = raycluster_manifest(raycluster_spec(settings, image))
    k8s.apiextensions.CustomResource(
        "marin-raycluster",
        api_version=manifest["apiVersion"],
        kind=manifest["kind"],
        metadata=manifest["metadata"],
        spec=manifest["spec"],
        # The CRD comes with the operator's chart.
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[operator, account])),
    )
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[account]))
