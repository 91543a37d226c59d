"""deploy/kuberay-raycluster.yaml, validated offline: it is the output of its generator (fray.kuberay),
it matches a JSON schema of the KubeRay RayCluster CRD fields we use (ray.io/v1), and it has the
consistency marin relies on (versions, ports, replica bounds)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import ray
import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"

QUANTITY = {
    "anyOf": [
        {"type": "integer", "minimum": 0},
        {"type": "string", "pattern": r"^\d+(\.\d+)?(m|k|Ki|Mi|Gi|Ti|M|G|T)?$"},
    ]
}
RESOURCE_LIST = {"type": "object", "additionalProperties": QUANTITY}
CONTAINER = {
    "type": "object",
    "required": ["name", "image"],
    "properties": {
        "name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
        "image": {"type": "string", "minLength": 1},
        "imagePullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
        "ports": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["containerPort"],
                "properties": {
                    "containerPort": {"type": "integer", "minimum": 1, "maximum": 65535},
                    "name": {"type": "string"},
                },
            },
        },
        "env": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string"}, "value": {"type": "string"}},
            },
        },
        "resources": {
            "type": "object",
            "properties": {"requests": RESOURCE_LIST, "limits": RESOURCE_LIST},
            "additionalProperties": False,
        },
    },
}
POD_TEMPLATE = {
    "type": "object",
    "required": ["spec"],
    "properties": {
        "spec": {
            "type": "object",
            "required": ["containers"],
            "properties": {
                "containers": {"type": "array", "minItems": 1, "items": CONTAINER},
                "tolerations": {"type": "array"},
                "nodeSelector": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        }
    },
}
RAY_START_PARAMS = {
    "type": "object",
    "additionalProperties": {"type": "string"},
}  # map[string]string in the CRD
GROUP_LABELS = {
    "type": "object",
    "additionalProperties": {"type": "string"},
}  # map[string]string (KubeRay >= 1.5.1)
SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "ray.io/v1"},
        "kind": {"const": "RayCluster"},
        "metadata": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63}
            },
        },
        "spec": {
            "type": "object",
            "required": ["headGroupSpec"],
            "additionalProperties": False,
            "properties": {
                "rayVersion": {"type": "string"},
                "enableInTreeAutoscaling": {"type": "boolean"},
                "autoscalerOptions": {
                    "type": "object",
                    "properties": {
                        "idleTimeoutSeconds": {"type": "integer", "minimum": 0},
                        "upscalingMode": {"enum": ["Default", "Aggressive", "Conservative"]},
                    },
                },
                "headGroupSpec": {
                    "type": "object",
                    "required": ["rayStartParams", "template"],
                    "properties": {
                        "serviceType": {"enum": ["ClusterIP", "NodePort", "LoadBalancer"]},
                        "labels": GROUP_LABELS,
                        "rayStartParams": RAY_START_PARAMS,
                        "template": POD_TEMPLATE,
                    },
                },
                "workerGroupSpecs": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["groupName", "rayStartParams", "template"],
                        "properties": {
                            "groupName": {"type": "string", "minLength": 1},
                            "replicas": {"type": "integer", "minimum": 0},
                            "minReplicas": {"type": "integer", "minimum": 0},
                            "maxReplicas": {"type": "integer", "minimum": 0},
                            "labels": GROUP_LABELS,
                            "rayStartParams": RAY_START_PARAMS,
                            "template": POD_TEMPLATE,
                        },
                    },
                },
            },
        },
    },
}


def test_committed_manifest_is_the_generators_output():
    # The command the file's header and docs/infra.md give for regenerating it, run verbatim.
    from fray.kuberay import RayClusterSpec, raycluster_manifest, render_yaml

    run = subprocess.run([sys.executable, "-m", "fray.kuberay"], capture_output=True, text=True, check=True)
    committed = (DEPLOY / "kuberay-raycluster.yaml").read_text()
    assert run.stdout == committed, (
        "deploy/kuberay-raycluster.yaml is stale: run `python -m fray.kuberay > deploy/kuberay-raycluster.yaml`"
    )
    assert render_yaml(raycluster_manifest(RayClusterSpec())) == committed
    assert yaml.safe_load(committed) == raycluster_manifest(RayClusterSpec())


def test_generator_names_the_group_whose_replicas_are_out_of_bounds():
    from fray.kuberay import RayClusterSpec, WorkerGroup, raycluster_manifest

    bad = RayClusterSpec(
        groups=(WorkerGroup("gpu-a100", cpu=8, memory="64Gi", replicas=5, max_replicas=4, gpus=8),)
    )
    with pytest.raises(
        ValueError,
        match=r"worker group 'gpu-a100': replicas=5 must lie in \[min_replicas=0, max_replicas=4\]",
    ):
        raycluster_manifest(bad)
    twice = RayClusterSpec(groups=(WorkerGroup("cpu", cpu=1, memory="1Gi", max_replicas=1),) * 2)
    with pytest.raises(ValueError, match="unique"):
        raycluster_manifest(twice)


def _manifest() -> dict:
    return yaml.safe_load((DEPLOY / "kuberay-raycluster.yaml").read_text())


def test_manifest_matches_the_raycluster_schema():
    jsonschema.validate(_manifest(), SCHEMA)


def test_schema_rejects_what_kuberay_would():
    broken = _manifest()
    del broken["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"]
    errors = list(jsonschema.Draft202012Validator(SCHEMA).iter_errors(broken))
    assert [e.message for e in errors] == ["'image' is a required property"]
    broken = _manifest()
    broken["spec"]["workerGroupSpecs"][0]["rayStartParams"] = {"num-cpus": 8}  # must be a string
    assert not jsonschema.Draft202012Validator(SCHEMA).is_valid(broken)


def test_ray_versions_agree_and_the_head_serves_the_jobs_api():
    spec = _manifest()["spec"]
    assert spec["rayVersion"] == ray.__version__
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert re.search(rf"^FROM rayproject/ray:{re.escape(ray.__version__)}-py311$", dockerfile, re.M)
    head = spec["headGroupSpec"]
    assert head["rayStartParams"]["dashboard-host"] == "0.0.0.0"  # reachable for `marin submit`
    ports = {p["containerPort"] for p in head["template"]["spec"]["containers"][0]["ports"]}
    assert {6379, 8265} <= ports


def test_worker_groups_have_consistent_replicas_and_gpu_limits():
    groups = _manifest()["spec"]["workerGroupSpecs"]
    assert len({g["groupName"] for g in groups}) == len(groups)
    for group in groups:
        assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"], group["groupName"]
        for container in group["template"]["spec"]["containers"]:
            resources = container["resources"]
            gpus = resources["limits"].get("nvidia.com/gpu")
            assert resources["requests"].get("nvidia.com/gpu") == gpus  # Kubernetes requires equal GPU asks


def test_group_labels_are_ray_node_labels_that_fray_places_steps_by():
    from ray._private.label_utils import validate_node_label_syntax

    from fray.cluster import ResourceConfig
    from fray.cluster.placement import (
        MARKET_TYPE_LABEL,
        REGION_LABEL,
        label_selector,
        selector_matches,
        why_no_node_is_allowed,
    )

    spec = _manifest()["spec"]
    groups = {"head": spec["headGroupSpec"], **{g["groupName"]: g for g in spec["workerGroupSpecs"]}}
    for name, group in groups.items():
        validate_node_label_syntax(group["labels"])  # what `ray start --labels` accepts
        assert REGION_LABEL in group["labels"], name
        # A spot group's pods must land on spot VMs, and only a spot group's.
        on_spot = group["template"]["spec"].get("nodeSelector", {}).get("cloud.google.com/gke-spot") == "true"
        assert (group["labels"][MARKET_TYPE_LABEL] == "spot") == on_spot, name
    labels = [g["labels"] for g in groups.values()]
    region = spec["headGroupSpec"]["labels"][REGION_LABEL]
    assert why_no_node_is_allowed(ResourceConfig(regions=[region], preemptible=False), labels) is None
    on_demand = label_selector(ResourceConfig(preemptible=False))
    assert {n for n, g in groups.items() if not selector_matches(on_demand, g["labels"])} == {"cpu-spot"}
