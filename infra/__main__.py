"""The Pulumi program: read the stack's config and provision marin's environment (docs/infra.md)."""

import pulumi
from marin_infra.program import provision

outputs = provision(pulumi.Config("marin-infra"))
for name, value in outputs.items():
    pulumi.export(name, value)
