"""Marina (`marin ui`) on Cloud Run: the same image, running as marin-ui, reachable by invokers only.

Access has two locks. Cloud Run admits only authenticated callers holding roles/run.invoker, granted
to the stack's `uiInvokers` (never allUsers or allAuthenticatedUsers; settings.py refuses them). And
`marin ui` itself, which binds a non-loopback address only with a token, checks the token kept in
Secret Manager, which only marin-ui may read. marin-ui can only view the bucket's objects.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from marin_infra.identity import member
from marin_infra.settings import Settings

SERVICE_NAME = "marin-ui"
TOKEN_SECRET_ID = "marin-ui-token"
TOKEN_ENV = "MARIN_UI_TOKEN"
# Cloud Run sets $PORT; `marin ui` needs --host and --token to serve anything but loopback.
UI_COMMAND = 'exec marin ui "$MARIN_PREFIX" --host 0.0.0.0 --port "$PORT" --token "$MARIN_UI_TOKEN"'


def marina(
    settings: Settings,
    ui_account: gcp.serviceaccount.Account,
    prefix: pulumi.Input[str],
    image: str,
    opts: pulumi.ResourceOptions,
) -> gcp.cloudrunv2.Service:
    """The UI's token secret, the Cloud Run service and who may invoke it."""
    secret = gcp.secretmanager.Secret(
        TOKEN_SECRET_ID,
        secret_id=TOKEN_SECRET_ID,
        project=settings.project,
        replication=gcp.secretmanager.SecretReplicationArgs(
            auto=gcp.secretmanager.SecretReplicationAutoArgs()
        ),
        opts=opts,
    )
    version = gcp.secretmanager.SecretVersion(
        TOKEN_SECRET_ID, secret=secret.id, secret_data=settings.ui_token, opts=opts
    )
    accessor = gcp.secretmanager.SecretIamMember(
        "marin-ui-token-access",
        project=settings.project,
        secret_id=secret.secret_id,
        role="roles/secretmanager.secretAccessor",
        member=member(ui_account),
        opts=opts,
    )
    service = gcp.cloudrunv2.Service(
        SERVICE_NAME,
        name=SERVICE_NAME,
        project=settings.project,
        location=settings.region,
        # Reachable at its URL, but IAM rejects every caller without roles/run.invoker.
        ingress="INGRESS_TRAFFIC_ALL",
        invoker_iam_disabled=False,
        deletion_protection=False,
        template=gcp.cloudrunv2.ServiceTemplateArgs(
            service_account=ui_account.email,
            scaling=gcp.cloudrunv2.ServiceTemplateScalingArgs(min_instance_count=0, max_instance_count=2),
            containers=[
                gcp.cloudrunv2.ServiceTemplateContainerArgs(
                    image=image,
                    commands=["sh", "-c"],
                    args=[UI_COMMAND],
                    envs=[
                        gcp.cloudrunv2.ServiceTemplateContainerEnvArgs(name="MARIN_PREFIX", value=prefix),
                        gcp.cloudrunv2.ServiceTemplateContainerEnvArgs(
                            name=TOKEN_ENV,
                            value_source=gcp.cloudrunv2.ServiceTemplateContainerEnvValueSourceArgs(
                                secret_key_ref=gcp.cloudrunv2.ServiceTemplateContainerEnvValueSourceSecretKeyRefArgs(
                                    secret=secret.secret_id, version="latest"
                                )
                            ),
                        ),
                    ],
                    resources=gcp.cloudrunv2.ServiceTemplateContainerResourcesArgs(
                        limits={"cpu": "1", "memory": "2Gi"}
                    ),
                )
            ],
        ),
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[version, accessor])),
    )
    for i, invoker in enumerate(settings.ui_invokers):
        gcp.cloudrunv2.ServiceIamMember(
            f"marin-ui-invoker-{i}",
            project=settings.project,
            location=settings.region,
            name=service.name,
            role="roles/run.invoker",
            member=invoker,
            opts=opts,
        )
    return service
