"""The whole environment, composed: APIs, bucket, registry, identities, GKE + Ray, Marina; its outputs."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from fray.kuberay import DASHBOARD_PORT, head_service_address, head_service_name
from marin_infra import settings as config_
from marin_infra.cluster import gke
from marin_infra.identity import identities
from marin_infra.ray_cluster import ray_on_gke, raycluster_spec
from marin_infra.registry import image_repository, image_url
from marin_infra.storage import marin_gc, prefix_bucket
from marin_infra.ui import marina

APIS = (
    "container.googleapis.com",
    "artifactregistry.googleapis.com",
    "run.googleapis.com",
    "secretmanager.googleapis.com",
    "iam.googleapis.com",
)


def provision(config: pulumi.Config) -> dict[str, pulumi.Input[str]]:
    """Declare every resource of the stack and return the outputs a researcher needs."""
    settings = config_.load(config)
    apis = {
        api.split(".")[0]: gcp.projects.Service(
            api.split(".")[0], project=settings.project, service=api, disable_on_destroy=False
        )
        for api in APIS
    }
    opts = pulumi.ResourceOptions(depends_on=list(apis.values()))
    bucket = prefix_bucket(settings, opts)
    # Only its own API: docs/infra.md creates it alone first (`pulumi up --target`), to push the image.
    repository = image_repository(settings, pulumi.ResourceOptions(depends_on=[apis["artifactregistry"]]))
    accounts = identities(settings, bucket, repository, opts)
    image = image_url(settings)
    cluster = gke(settings, accounts.worker, opts)
    worker_pods = ray_on_gke(settings, cluster.cluster, cluster.pools, accounts.worker.email, image)
    prefix = bucket.name.apply(lambda name: f"gs://{name}")
    if settings.gc_schedule:
        marin_gc(settings.gc_schedule, settings.gc_keep_latest, prefix, image, worker_pods)
    service = marina(settings, accounts.ui, prefix, image, opts)
    ray = raycluster_spec(settings, image)
    return {
        "marinPrefix": prefix,
        "image": image,
        "clusterName": cluster.cluster.name,
        "rayJobsAddress": head_service_address(ray),
        "rayPortForward": (
            f"kubectl -n {ray.namespace} port-forward svc/{head_service_name(ray)} {DASHBOARD_PORT}:{DASHBOARD_PORT}"
        ),
        "uiUrl": service.uri,
        "workerServiceAccount": accounts.worker.email,
        "uiServiceAccount": accounts.ui.email,
    }
