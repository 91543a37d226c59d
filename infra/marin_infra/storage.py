"""The prefix bucket: where every step writes (MARIN_PREFIX), private to the project's identities.

No lifecycle rule deletes anything. Whether a folder is garbage (a moved-aside copy, an older
version of a step that no kept output depends on) is decided from the engine's records
(`.marin_aside`, `.executor_status`, `.executor_info`), which a GCS lifecycle condition cannot read:
it matches only names, ages and the like. Garbage is deleted by the engine's own `marin gc PREFIX
--yes` (marin.execution.gc): by hand, or on the stack's `gcSchedule` by a Kubernetes CronJob running
as marin-worker (docs/infra.md).
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from marin_infra.identity import POD_NAMESPACE, POD_SERVICE_ACCOUNT
from marin_infra.settings import Settings


def prefix_bucket(settings: Settings, opts: pulumi.ResourceOptions) -> gcp.storage.Bucket:
    """The regional bucket, co-located with the cluster: uniform access, no versioning, never public."""
    return gcp.storage.Bucket(
        "marin-prefix",
        name=settings.bucket_name,
        project=settings.project,
        location=settings.region.upper(),
        uniform_bucket_level_access=True,
        public_access_prevention="enforced",
        # Steps rewrite nothing in place (outputs are content-addressed), so versions would only cost.
        versioning=gcp.storage.BucketVersioningArgs(enabled=False),
        # `pulumi destroy` must never delete research outputs; empty the bucket by hand first.
        force_destroy=False,
        opts=opts,
    )


def marin_gc(
    schedule: str,
    keep_latest: int,
    prefix: pulumi.Input[str],
    image: str,
    worker_pods: pulumi.ResourceOptions,
) -> k8s.batch.v1.CronJob:
    """A CronJob that runs `marin gc PREFIX --keep-latest N --yes` on `schedule`, as marin-worker, on the CPU pool.

    Each run deletes the garbage that exists then, so a moved-aside copy or an old version outlives
    its replacement by at most one period. Never two at once; a run that fails is retried, not stacked.
    """
    container = {
        "name": "marin-gc",
        "image": image,
        "command": ["marin", "gc", prefix, "--keep-latest", str(keep_latest), "--yes"],
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}},
    }
    return k8s.batch.v1.CronJob(
        "marin-gc",
        metadata={"name": "marin-gc", "namespace": POD_NAMESPACE},
        spec={
            "schedule": schedule,
            "concurrencyPolicy": "Forbid",
            "jobTemplate": {
                "spec": {
                    "backoffLimit": 2,
                    "template": {
                        "spec": {
                            "serviceAccountName": POD_SERVICE_ACCOUNT,
                            "restartPolicy": "OnFailure",
                            "containers": [container],
                        }
                    },
                }
            },
        },
        opts=worker_pods,
    )
