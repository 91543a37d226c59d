"""The prefix bucket: where every step writes (MARIN_PREFIX), private to the project's identities.

No lifecycle rule deletes anything. The engine moves an older output aside to a sibling
`<output>.superseded-<key8>-<time>/` directory (marin.execution.gc); GCS lifecycle conditions match
only an object name's prefix or suffix, and that marker sits in the middle of every object's name, so
no rule can select those copies without also risking live outputs. They are deleted by the engine's
own `marin gc PREFIX --superseded`, which recognises them by the engine's pattern: by hand, or on the
stack's `supersededGcSchedule` by a Kubernetes CronJob running as marin-worker (docs/infra.md).
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


def superseded_gc(
    schedule: str, prefix: pulumi.Input[str], image: str, worker_pods: pulumi.ResourceOptions
) -> k8s.batch.v1.CronJob:
    """A CronJob that runs `marin gc PREFIX --superseded` on `schedule`, as marin-worker, on the CPU pool.

    Each run deletes every superseded copy that exists then, so a copy outlives its supersession by
    at most one period. Never two at once; a run that fails is retried, not stacked.
    """
    container = {
        "name": "marin-gc",
        "image": image,
        "command": ["marin", "gc", prefix, "--superseded"],
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}},
    }
    return k8s.batch.v1.CronJob(
        "marin-gc-superseded",
        metadata={"name": "marin-gc-superseded", "namespace": POD_NAMESPACE},
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
