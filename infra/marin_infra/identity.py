"""Least-privilege identities: `marin-worker` for the Ray pods and nodes, `marin-ui` for Marina.

- marin-worker: object admin on the prefix bucket only, reader of the image repository only, and log
  writer (a project-level role: logs have no narrower scope). GKE nodes run as it (pulling images,
  writing logs) and Ray pods act as it through Workload Identity (reading and writing outputs).
- marin-ui: object viewer on the prefix bucket only (granted here) and accessor of its own token
  secret only (granted in ui.py). Nothing it runs can write or delete.
No primitive role (owner/editor/viewer) and no public member appear anywhere; every grant is an
additive `*IAMMember`, never a policy or binding that would replace other grants on the resource.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from marin_infra.settings import Settings

WORKER_ACCOUNT_ID = "marin-worker"
UI_ACCOUNT_ID = "marin-ui"
# The Kubernetes service account every Ray pod runs as, bound to marin-worker by Workload Identity.
POD_NAMESPACE = "marin"
POD_SERVICE_ACCOUNT = "marin-worker"
WORKLOAD_IDENTITY_ANNOTATION = "iam.gke.io/gcp-service-account"


@dataclass(frozen=True)
class Identities:
    """The two Google service accounts the environment runs as."""

    worker: gcp.serviceaccount.Account
    ui: gcp.serviceaccount.Account


def member(account: gcp.serviceaccount.Account) -> pulumi.Output[str]:
    """The IAM member string of a service account."""
    return account.email.apply(lambda email: f"serviceAccount:{email}")


def _account(
    settings: Settings, account_id: str, display_name: str, opts: pulumi.ResourceOptions
) -> gcp.serviceaccount.Account:
    return gcp.serviceaccount.Account(
        account_id, account_id=account_id, project=settings.project, display_name=display_name, opts=opts
    )


def identities(
    settings: Settings,
    bucket: gcp.storage.Bucket,
    repository: gcp.artifactregistry.Repository,
    opts: pulumi.ResourceOptions,
) -> Identities:
    """Create both accounts and every grant they hold on the bucket, the registry and the project."""
    worker = _account(
        settings, WORKER_ACCOUNT_ID, "marin Ray nodes and pods (read/write the prefix bucket)", opts
    )
    ui = _account(settings, UI_ACCOUNT_ID, "Marina UI (read-only on the prefix bucket)", opts)
    gcp.storage.BucketIAMMember(
        "marin-worker-bucket-objects",
        bucket=bucket.name,
        role="roles/storage.objectAdmin",
        member=member(worker),
        opts=opts,
    )
    gcp.storage.BucketIAMMember(
        "marin-ui-bucket-objects",
        bucket=bucket.name,
        role="roles/storage.objectViewer",
        member=member(ui),
        opts=opts,
    )
    gcp.artifactregistry.RepositoryIamMember(
        "marin-worker-images",
        project=settings.project,
        location=repository.location,
        repository=repository.repository_id,
        role="roles/artifactregistry.reader",
        member=member(worker),
        opts=opts,
    )
    gcp.projects.IAMMember(
        "marin-worker-logs",
        project=settings.project,
        role="roles/logging.logWriter",
        member=member(worker),
        opts=opts,
    )
    gcp.serviceaccount.IAMMember(
        "marin-worker-workload-identity",
        service_account_id=worker.name,
        role="roles/iam.workloadIdentityUser",
        member=f"serviceAccount:{settings.project}.svc.id.goog[{POD_NAMESPACE}/{POD_SERVICE_ACCOUNT}]",
        opts=opts,
    )
    return Identities(worker=worker, ui=ui)
