"""The KubeRay `RayCluster` manifest for marin, from one definition.

`deploy/kuberay-raycluster.yaml` is `render_yaml(raycluster_manifest(RayClusterSpec()))` (regenerate it
with `python -m fray.kuberay > deploy/kuberay-raycluster.yaml`), and the Pulumi program in `infra/`
applies `raycluster_manifest(...)` of a spec built from its stack config. Both come from this module,
so the cluster Pulumi creates and the one in `deploy/` cannot drift apart.

Every group carries the Ray node labels fray places steps by (`fray.cluster.placement`): the region,
and the market type (`spot` for a group on spot VMs, so steps with preemptible=False never run there).
This module imports neither ray nor Kubernetes clients: it builds plain dicts.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import yaml

from fray.cluster.placement import MARKET_TYPE_LABEL, REGION_LABEL

# Must equal the Ray of deploy/Dockerfile's base image (tests/fray/test_kuberay_manifest.py checks both
# against the installed ray).
RAY_VERSION = "2.60.0"
DEFAULT_IMAGE = "ghcr.io/YOUR_ORG/marin:latest"
# GKE labels spot nodes so; infra/ taints its spot pool with the same key, so only spot groups land there.
GKE_SPOT_LABEL = "cloud.google.com/gke-spot"
HEAD_SERVICE_SUFFIX = "-head-svc"  # KubeRay names the head's Service <cluster name>-head-svc
DASHBOARD_PORT = 8265


@dataclass(frozen=True)
class WorkerGroup:
    """One autoscaled group of identical Ray worker pods."""

    name: str
    cpu: int
    memory: str  # a Kubernetes quantity, e.g. "32Gi"
    max_replicas: int
    replicas: int = 0
    min_replicas: int = 0
    gpus: int = 0
    spot: bool = False


@dataclass(frozen=True)
class RayClusterSpec:
    """What varies between marin's Ray clusters; the defaults are deploy/kuberay-raycluster.yaml's."""

    name: str = "marin"
    image: str = DEFAULT_IMAGE
    region: str = "us-central1"
    namespace: str | None = None
    service_account: str | None = None  # a Kubernetes service account (Workload Identity) for every pod
    head_cpu: int = 2
    head_memory: str = "8Gi"
    idle_timeout_s: int = 300
    groups: tuple[WorkerGroup, ...] = field(
        default_factory=lambda: (
            WorkerGroup("cpu", cpu=8, memory="32Gi", replicas=1, max_replicas=8),
            WorkerGroup("cpu-spot", cpu=8, memory="32Gi", max_replicas=16, spot=True),
            WorkerGroup("gpu-h100", cpu=16, memory="128Gi", max_replicas=4, gpus=8),
        )
    )


def head_service_name(spec: RayClusterSpec) -> str:
    """The Kubernetes Service KubeRay creates in front of the head (dashboard, Jobs API, GCS)."""
    return f"{spec.name}{HEAD_SERVICE_SUFFIX}"


def head_service_address(spec: RayClusterSpec) -> str:
    """The in-cluster URL of the head's dashboard / Jobs API (what `marin submit --address` takes)."""
    namespace = spec.namespace or "default"
    return f"http://{head_service_name(spec)}.{namespace}.svc.cluster.local:{DASHBOARD_PORT}"


def _resources(cpu: int, memory: str, gpus: int = 0) -> dict:
    amounts: dict = {"cpu": str(cpu), "memory": memory}
    if gpus:
        amounts["nvidia.com/gpu"] = gpus
    return {"requests": dict(amounts), "limits": dict(amounts)}


def _labels(spec: RayClusterSpec, spot: bool) -> dict[str, str]:
    return {REGION_LABEL: spec.region, MARKET_TYPE_LABEL: "spot" if spot else "on-demand"}


def _pod_spec(spec: RayClusterSpec, container: dict) -> dict:
    pod: dict = {}
    if spec.service_account:
        pod["serviceAccountName"] = spec.service_account
    pod["containers"] = [container]
    return pod


def _worker_group(spec: RayClusterSpec, group: WorkerGroup) -> dict:
    if not group.min_replicas <= group.replicas <= group.max_replicas:
        raise ValueError(
            f"worker group {group.name!r}: replicas={group.replicas} must lie in "
            f"[min_replicas={group.min_replicas}, max_replicas={group.max_replicas}]"
        )
    container = {
        "name": "ray-worker",
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "resources": _resources(group.cpu, group.memory, group.gpus),
    }
    pod = _pod_spec(spec, container)
    tolerations = []
    if group.spot:
        pod["nodeSelector"] = {GKE_SPOT_LABEL: "true"}
        tolerations.append(
            {"key": GKE_SPOT_LABEL, "operator": "Equal", "value": "true", "effect": "NoSchedule"}
        )
    if group.gpus:
        tolerations.append({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"})
    if tolerations:
        pod["tolerations"] = tolerations
    return {
        "groupName": group.name,
        "replicas": group.replicas,
        "minReplicas": group.min_replicas,
        "maxReplicas": group.max_replicas,
        "labels": _labels(spec, group.spot),
        # Empty: Ray detects a GPU node's model and advertises accelerator_type:<model>, which is what
        # ResourceConfig.with_gpu("H100", n) asks for.
        "rayStartParams": {},
        "template": {"spec": pod},
    }


def raycluster_manifest(spec: RayClusterSpec) -> dict:
    """The `ray.io/v1` RayCluster for `spec`, as the dict `kubectl apply` or Pulumi takes."""
    names = [g.name for g in spec.groups]
    if len(set(names)) != len(names):
        raise ValueError(f"worker group names must be unique, got {names}")
    metadata: dict = {"name": spec.name}
    if spec.namespace:
        metadata["namespace"] = spec.namespace
    metadata["labels"] = {"app.kubernetes.io/name": spec.name}
    head_container = {
        "name": "ray-head",
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "ports": [
            {"containerPort": 6379, "name": "gcs-server"},
            {"containerPort": DASHBOARD_PORT, "name": "dashboard"},
            {"containerPort": 10001, "name": "client"},
        ],
        # Worker groups start at zero replicas: a GPU step waits for the autoscaler instead of failing
        # at once for lack of a GPU node.
        "env": [{"name": "FRAY_RAY_AUTOSCALING", "value": "1"}],
        "resources": _resources(spec.head_cpu, spec.head_memory),
    }
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": metadata,
        "spec": {
            "rayVersion": RAY_VERSION,
            "enableInTreeAutoscaling": True,
            "autoscalerOptions": {"idleTimeoutSeconds": spec.idle_timeout_s, "upscalingMode": "Default"},
            "headGroupSpec": {
                "serviceType": "ClusterIP",
                "labels": _labels(spec, spot=False),
                # The head schedules no steps: it runs the job drivers (the step runner) and the GCS.
                "rayStartParams": {"dashboard-host": "0.0.0.0", "num-cpus": "0"},
                "template": {"spec": _pod_spec(spec, head_container)},
            },
            "workerGroupSpecs": [_worker_group(spec, g) for g in spec.groups],
        },
    }


HEADER = """\
# GENERATED by `python -m fray.kuberay > deploy/kuberay-raycluster.yaml` from src/fray/kuberay.py; edit
# that module, not this file (tests/fray/test_kuberay_manifest.py checks they agree). infra/ (Pulumi)
# applies the same generator's output with its stack's image, region and groups (docs/infra.md).
#
# A Ray cluster on Kubernetes for marin, managed by the KubeRay operator (ray.io/v1 RayCluster).
#
#   helm repo add kuberay https://ray-project.github.io/kuberay-helm/
#   helm install kuberay-operator kuberay/kuberay-operator
#   kubectl apply -f deploy/kuberay-raycluster.yaml
#   kubectl port-forward svc/marin-head-svc 8265:8265
#   marin submit --address http://127.0.0.1:8265 --prefix gs://YOUR_BUCKET/marin experiments/tutorials/demo.py
#
# Every node runs the same image (deploy/Dockerfile: Ray + marin). Steps write to --prefix, which
# must be storage every pod sees (gs://, s3://); never a pod's local disk. The head schedules no
# steps (num-cpus 0): it runs the job drivers (the step runner) and the GCS. Worker groups start at
# zero replicas and FRAY_RAY_AUTOSCALING=1 lets a GPU step wait for the autoscaler. A GPU group's
# rayStartParams stay empty: Ray detects the GPUs' model and advertises accelerator_type:H100, which
# is what ResourceConfig.with_gpu("H100", n) asks for.
#
# Each group's `labels` (KubeRay >= 1.5.1; the operator passes them to `ray start` and to the
# autoscaler) say where its nodes are, which is what ResourceConfig(regions=..., preemptible=...)
# selects on: ray.io/availability-region (set it to the region your Kubernetes cluster runs in) and
# ray.io/market-type (spot for a group on spot VMs: steps with preemptible=False never run there).
# With an older KubeRay, put them in rayStartParams instead: labels: "ray.io/market-type=spot,...".
"""


def render_yaml(manifest: dict) -> str:
    """The manifest as the YAML committed in deploy/, header comment included."""
    return HEADER + yaml.safe_dump(manifest, sort_keys=False, default_flow_style=False, width=110)


if __name__ == "__main__":
    sys.stdout.write(render_yaml(raycluster_manifest(RayClusterSpec())))
