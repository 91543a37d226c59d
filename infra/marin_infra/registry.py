"""The Artifact Registry repository for the image built from deploy/Dockerfile."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from marin_infra.settings import Settings

REPOSITORY_ID = "marin"
IMAGE_NAME = "marin"


def image_repository(settings: Settings, opts: pulumi.ResourceOptions) -> gcp.artifactregistry.Repository:
    """A Docker repository in the cluster's region (pulls stay in-region)."""
    return gcp.artifactregistry.Repository(
        "marin-images",
        repository_id=REPOSITORY_ID,
        project=settings.project,
        location=settings.region,
        format="DOCKER",
        description="marin images built from deploy/Dockerfile",
        opts=opts,
    )


def image_url(settings: Settings) -> str:
    """Where `docker push` puts the image and where every pod and Cloud Run pull it from."""
    return f"{settings.region}-docker.pkg.dev/{settings.project}/{REPOSITORY_ID}/{IMAGE_NAME}:{settings.image_tag}"
