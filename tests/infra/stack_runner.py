"""Run infra/'s real Pulumi program offline, with Pulumi's mocks, and record what it declares.

No cloud call, no Pulumi service and no `pulumi` CLI: `pulumi.runtime.set_mocks` stands in for the
engine, and `Recorder` plays the providers, filling in the few values Google would compute (a service
account's email, the cluster's endpoint, the UI's URL) so that everything downstream of them resolves.
"""

from __future__ import annotations

import asyncio
import json
import runpy
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime.mocks import MockMonitor

INFRA = Path(__file__).resolve().parents[2] / "infra"
if str(INFRA) not in sys.path:
    sys.path.insert(0, str(INFRA))  # what Pulumi's Python host does for the program's directory

UI_TOKEN = "test-token"


@dataclass(frozen=True)
class Declared:
    """One resource the program declared: its type, logical name, resolved inputs, URN and dependencies."""

    type: str
    name: str
    inputs: dict[str, Any]
    urn: str = ""
    dependencies: frozenset[str] = frozenset()  # URNs: explicit depends_on and those its inputs came from


@dataclass
class Deployment:
    """Everything one run of the program declared, and its stack outputs."""

    stack: str
    resources: list[Declared]
    outputs: dict[str, Any] = field(default_factory=dict)

    def of_type(self, suffix: str) -> list[Declared]:
        """The resources whose type token ends with `suffix`, e.g. ':NodePool'."""
        return [r for r in self.resources if r.type.endswith(suffix)]

    def one(self, suffix: str) -> Declared:
        """The single resource of a type."""
        found = self.of_type(suffix)
        assert len(found) == 1, f"expected one {suffix}, found {[r.name for r in found]}"
        return found[0]


def _computed(typ: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """What the provider would add to a resource's state, for the outputs the program reads."""
    if typ == "gcp:serviceaccount/account:Account":
        email = f"{inputs['accountId']}@{inputs['project']}.iam.gserviceaccount.com"
        return {"email": email, "name": f"projects/{inputs['project']}/serviceAccounts/{email}"}
    if typ == "gcp:container/cluster:Cluster":
        return {"endpoint": "203.0.113.10", "masterAuth": {"clusterCaCertificate": "Q0EK"}}
    if typ == "gcp:cloudrunv2/service:Service":
        return {"uri": f"https://{inputs['name']}-abc123-uc.a.run.app"}
    return {}


def _engine_urn(mock_urn: str) -> str:
    # The mock monitor qualifies a top-level resource's type with the root stack's; the engine does not.
    return mock_urn.replace("::pulumi:pulumi:Stack$", "::")


class RecordingMonitor(MockMonitor):
    """The mocks' monitor, also remembering each registration's URN and dependencies."""

    def __init__(self, mocks: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks)
        self.registered: dict[tuple[str, str], tuple[str, frozenset[str]]] = {}

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        dependencies = set(request.dependencies)
        for property_dependencies in request.propertyDependencies.values():
            dependencies.update(property_dependencies.urns)
        self.registered[(request.type, request.name)] = (
            _engine_urn(response.urn),
            frozenset(_engine_urn(u) for u in dependencies),
        )
        return response


class Recorder(pulumi.runtime.Mocks):
    """Mocks that accept every resource and remember its inputs."""

    def __init__(self) -> None:
        self.resources: list[Declared] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        self.resources.append(Declared(args.typ, args.name, dict(args.inputs)))
        return f"{args.name}-id", {**args.inputs, **_computed(args.typ, args.inputs)}

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


def stack_config(stack: str) -> dict[str, Any]:
    """The `config:` of infra/Pulumi.<stack>.yaml, as committed."""
    return yaml.safe_load((INFRA / f"Pulumi.{stack}.yaml").read_text())["config"]


def set_stack_config(stack: str, overrides: dict[str, Any] | None = None, drop: tuple[str, ...] = ()) -> None:
    """Make an example stack's config (plus overrides, minus `drop`) what `pulumi.Config` reads."""
    config = {**stack_config(stack), "marin-infra:uiToken": UI_TOKEN, **(overrides or {})}
    for key in drop:
        config.pop(key)
    # Pulumi hands structured config to the program as JSON strings, as here.
    pulumi.runtime.set_all_config(
        {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()},
        secret_keys=["marin-infra:uiToken"],
    )


def run_stack(stack: str, overrides: dict[str, Any] | None = None, drop: tuple[str, ...] = ()) -> Deployment:
    """Run infra/__main__.py for an example stack (plus overrides, minus `drop`) under the mocks."""
    set_stack_config(stack, overrides, drop)
    # Pulumi's mocks build futures on the current event loop; an earlier asyncio.run() in this
    # process (Ray's job client does one) leaves none set, so give the run a loop of its own.
    asyncio.set_event_loop(asyncio.new_event_loop())
    recorder = Recorder()
    monitor = RecordingMonitor(recorder)
    pulumi.runtime.set_mocks(recorder, project="marin-infra", stack=stack, preview=False, monitor=monitor)
    deployment = Deployment(stack, recorder.resources)

    @pulumi.runtime.test
    def program():
        namespace = runpy.run_path(str(INFRA / "__main__.py"))
        return pulumi.Output.all(**namespace["outputs"]).apply(deployment.outputs.update)

    program()
    for i, declared in enumerate(deployment.resources):
        urn, dependencies = monitor.registered[(declared.type, declared.name)]
        deployment.resources[i] = replace(declared, urn=urn, dependencies=dependencies)
    return deployment
