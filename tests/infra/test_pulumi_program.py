"""infra/'s real Pulumi program, run offline under Pulumi's mocks for both example stacks.

Nothing here reaches Google Cloud or the Pulumi service (`pulumi preview` was never run against a
project). What is checked is what the program declares: resources and their properties, every IAM
grant, the RayCluster against deploy/, and the errors a bad stack config gets.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REASON = (
    "the `infra` extra (pulumi, pulumi-gcp, pulumi-kubernetes) is not installed: pip install -e '.[infra]'"
)
pulumi = pytest.importorskip("pulumi", reason=REASON)
pytest.importorskip("pulumi_gcp", reason=REASON)
pytest.importorskip("pulumi_kubernetes", reason=REASON)

import yaml
from stack_runner import INFRA, UI_TOKEN, Deployment, run_stack, set_stack_config

from fray.cluster.placement import MARKET_TYPE_LABEL, REGION_LABEL

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "my-gcp-project"
WORKER = f"serviceAccount:marin-worker@{PROJECT}.iam.gserviceaccount.com"
UI = f"serviceAccount:marin-ui@{PROJECT}.iam.gserviceaccount.com"
IMAGE = f"us-central1-docker.pkg.dev/{PROJECT}/marin/marin:latest"
PRIMITIVE_ROLES = {"roles/owner", "roles/editor", "roles/viewer"}
PUBLIC = {"allUsers", "allAuthenticatedUsers"}


@pytest.fixture(scope="module")
def cpu() -> Deployment:
    return run_stack("cpu")


@pytest.fixture(scope="module")
def gpu() -> Deployment:
    return run_stack("gpu")


@pytest.fixture(params=["cpu", "gpu"])
def stack(request) -> Deployment:
    return request.getfixturevalue(request.param)


def test_bucket_is_regional_uniform_unversioned_and_never_public(stack):
    bucket = stack.one(":Bucket").inputs
    assert bucket["name"] == "my-gcp-project-marin"
    assert bucket["location"] == "US-CENTRAL1"
    assert bucket["uniformBucketLevelAccess"] is True
    assert bucket["publicAccessPrevention"] == "enforced"
    assert bucket["versioning"] == {"enabled": False}
    assert not bucket.get("forceDestroy")  # destroying the stack never deletes research outputs
    # No lifecycle rule: garbage is `marin gc`'s to delete, judged from records (see infra/marin_infra/storage.py).
    assert not bucket.get("lifecycleRules")
    assert stack.outputs["marinPrefix"] == "gs://my-gcp-project-marin"


def test_registry_holds_the_image_every_pod_and_the_ui_run(stack):
    repo = stack.one(":Repository").inputs
    assert (repo["format"], repo["location"], repo["repositoryId"]) == ("DOCKER", "us-central1", "marin")
    assert stack.outputs["image"] == IMAGE
    containers = stack.one("cloudrunv2/service:Service").inputs["template"]["containers"]
    assert [c["image"] for c in containers] == [IMAGE]


def test_cpu_stack_has_one_cpu_pool_labelled_on_demand(cpu):
    (pool,) = cpu.of_type(":NodePool")
    assert pool.inputs["name"] == "cpu"
    node = pool.inputs["nodeConfig"]
    assert node["machineType"] == "n2-standard-16"
    assert not node.get("spot") and not node.get("taints") and not node.get("guestAccelerators")
    assert node["labels"] == {REGION_LABEL: "us-central1", MARKET_TYPE_LABEL: "on-demand"}
    assert pool.inputs["autoscaling"]["totalMinNodeCount"] == 1
    assert pool.inputs["autoscaling"]["totalMaxNodeCount"] == 4


def test_gpu_stack_adds_a_tainted_spot_pool_and_a_gpu_pool(gpu):
    pools = {p.inputs["name"]: p.inputs for p in gpu.of_type(":NodePool")}
    assert set(pools) == {"cpu", "cpu-spot", "gpu-h100"}
    spot = pools["cpu-spot"]["nodeConfig"]
    assert spot["spot"] is True
    assert spot["labels"] == {REGION_LABEL: "us-central1", MARKET_TYPE_LABEL: "spot"}
    assert spot["taints"] == [{"key": "cloud.google.com/gke-spot", "value": "true", "effect": "NO_SCHEDULE"}]
    gpu_node = pools["gpu-h100"]["nodeConfig"]
    assert gpu_node["machineType"] == "a3-highgpu-8g"
    assert not gpu_node.get("spot")
    assert gpu_node["labels"] == {REGION_LABEL: "us-central1", MARKET_TYPE_LABEL: "on-demand"}
    (accelerator,) = gpu_node["guestAccelerators"]
    assert (accelerator["type"], accelerator["count"]) == ("nvidia-h100-80gb", 8)
    assert gpu.one(":Cluster").inputs["nodeLocations"] == ["us-central1-a", "us-central1-c"]


def test_cluster_is_standard_with_workload_identity_and_nodes_run_as_marin_worker(stack):
    cluster = stack.one("container/cluster:Cluster").inputs
    assert not cluster.get("enableAutopilot")
    assert cluster["location"] == "us-central1"
    assert cluster["removeDefaultNodePool"] is True
    assert cluster["workloadIdentityConfig"] == {"workloadPool": f"{PROJECT}.svc.id.goog"}
    for pool in stack.of_type(":NodePool"):
        node = pool.inputs["nodeConfig"]
        assert f"serviceAccount:{node['serviceAccount']}" == WORKER, pool.name
        assert node["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}, pool.name


def test_kuberay_operator_is_the_pinned_helm_chart(stack):
    release = stack.one(":Release").inputs
    assert release["chart"] == "kuberay-operator"
    assert release["version"] == "1.5.1"  # group `labels` need KubeRay >= 1.5.1
    assert release["repositoryOpts"] == {"repo": "https://ray-project.github.io/kuberay-helm/"}
    assert release["namespace"] == "kuberay-system"


def _applied_raycluster(deployment: Deployment) -> dict:
    inputs = deployment.one(":RayCluster").inputs
    return {k: inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")}


def _deploy_manifest_for_stack(groups: list[str], max_replicas: dict[str, int] | None = None) -> dict:
    """deploy/kuberay-raycluster.yaml with what a stack sets: image, namespace, service account, groups."""
    manifest = yaml.safe_load((ROOT / "deploy" / "kuberay-raycluster.yaml").read_text())
    manifest["metadata"]["namespace"] = "marin"
    spec = manifest["spec"]
    spec["workerGroupSpecs"] = [g for g in spec["workerGroupSpecs"] if g["groupName"] in groups]
    for group in [spec["headGroupSpec"], *spec["workerGroupSpecs"]]:
        pod = group["template"]["spec"]
        pod["serviceAccountName"] = "marin-worker"
        for container in pod["containers"]:
            container["image"] = IMAGE
    for group in spec["workerGroupSpecs"]:
        group["maxReplicas"] = (max_replicas or {}).get(group["groupName"], group["maxReplicas"])
    return manifest


def test_gpu_stacks_raycluster_is_deploys_with_the_stacks_image_and_identity(gpu):
    assert _applied_raycluster(gpu) == _deploy_manifest_for_stack(["cpu", "cpu-spot", "gpu-h100"])


def test_cpu_stacks_raycluster_is_deploys_cpu_group_sized_by_its_pool(cpu):
    assert _applied_raycluster(cpu) == _deploy_manifest_for_stack(["cpu"], {"cpu": 4})


def test_raycluster_is_the_generators_output_for_the_stacks_spec(stack):
    from marin_infra.ray_cluster import raycluster_spec
    from marin_infra.settings import load

    from fray.kuberay import raycluster_manifest

    set_stack_config(stack.stack)  # the config the program ran with, read by the program's own loader
    assert _applied_raycluster(stack) == raycluster_manifest(
        raycluster_spec(load(pulumi.Config("marin-infra")), IMAGE)
    )
    assert stack.outputs["rayJobsAddress"] == "http://marin-head-svc.marin.svc.cluster.local:8265"


def test_marin_gc_runs_on_the_stacks_schedule_only_keeping_its_configured_versions(cpu, gpu):
    assert cpu.of_type(":CronJob") == []  # no schedule configured: nothing deletes anything
    job = gpu.one(":CronJob").inputs
    assert job["metadata"] == {"name": "marin-gc", "namespace": "marin"}
    assert job["spec"]["schedule"] == "0 3 * * 0"
    assert job["spec"]["concurrencyPolicy"] == "Forbid"
    pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "marin-worker"  # the only identity that may delete objects
    assert "tolerations" not in pod  # on the on-demand CPU pool, never a spot or GPU node
    (container,) = pod["containers"]
    assert container["image"] == IMAGE
    assert container["command"] == ["marin", "gc", "gs://my-gcp-project-marin", "--keep-latest", "2", "--yes"]


def test_marin_gc_keeps_one_version_unless_gc_keep_latest_says_otherwise():
    job = run_stack("cpu", {"marin-infra:gcSchedule": "@daily"}).one(":CronJob").inputs
    assert job["spec"]["schedule"] == "@daily"
    (container,) = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["marin", "gc", "gs://my-gcp-project-marin", "--keep-latest", "1", "--yes"]


def test_ray_pods_act_as_marin_worker_through_workload_identity(stack):
    ksa = stack.one(":ServiceAccount").inputs["metadata"]
    assert (ksa["namespace"], ksa["name"]) == ("marin", "marin-worker")
    assert f"serviceAccount:{ksa['annotations']['iam.gke.io/gcp-service-account']}" == WORKER
    (binding,) = [r.inputs for r in stack.of_type("serviceaccount/iAMMember:IAMMember")]
    assert binding["role"] == "roles/iam.workloadIdentityUser"
    assert binding["member"] == f"serviceAccount:{PROJECT}.svc.id.goog[marin/marin-worker]"
    assert binding["serviceAccountId"].endswith("/marin-worker@my-gcp-project.iam.gserviceaccount.com")
    spec = _applied_raycluster(stack)["spec"]
    for group in [spec["headGroupSpec"], *spec["workerGroupSpecs"]]:
        assert group["template"]["spec"]["serviceAccountName"] == "marin-worker"


def test_ui_runs_marin_ui_as_marin_ui_for_authenticated_invokers_only(stack):
    service = stack.one("cloudrunv2/service:Service").inputs
    assert service["ingress"] == "INGRESS_TRAFFIC_ALL"
    assert service["invokerIamDisabled"] is False  # IAM checks every request: no anonymous caller
    template = service["template"]
    assert f"serviceAccount:{template['serviceAccount']}" == UI
    (container,) = template["containers"]
    assert container["commands"] == ["sh", "-c"]
    assert container["args"][0].startswith(
        'exec marin ui "$MARIN_PREFIX" --host 0.0.0.0 --port "$PORT" --token '
    )
    envs = {e["name"]: e for e in container["envs"]}
    assert envs["MARIN_PREFIX"]["value"] == "gs://my-gcp-project-marin"
    assert envs["MARIN_UI_TOKEN"]["valueSource"] == {
        "secretKeyRef": {"secret": "marin-ui-token", "version": "latest"}
    }
    # The token reaches Google only inside a Secret Manager version, and Pulumi keeps it a secret.
    secret_data = stack.one(":SecretVersion").inputs["secretData"]
    assert secret_data["value"] == UI_TOKEN and len(secret_data) == 2  # Pulumi's secret envelope
    assert stack.outputs["uiUrl"] == "https://marin-ui-abc123-uc.a.run.app"


def _grants(deployment: Deployment) -> set[tuple[str, str, str, str]]:
    """Every IAM grant as (type, scope, role, member); fails on any binding or policy resource."""
    grants = set()
    for resource in deployment.resources:
        kind = resource.type.rsplit(":", 1)[-1].lower()
        if "iam" not in kind:
            continue
        # *IAMBinding and *IAMPolicy replace who else holds a role on the resource; we only add.
        assert kind.endswith("iammember"), (
            f"{resource.type} {resource.name}: only additive IAM members are allowed"
        )
        inputs = resource.inputs
        scope = next(
            str(inputs[k])
            for k in ("bucket", "repository", "secretId", "serviceAccountId", "name", "project")
            if k in inputs
        )
        grants.add((resource.type.rsplit(":", 1)[-1], scope, inputs["role"], inputs["member"]))
    return grants


def _strings(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


@pytest.mark.parametrize("name", ["cpu", "gpu"])
def test_every_iam_grant_is_least_privilege(request, name):
    deployment = request.getfixturevalue(name)
    grants = _grants(deployment)
    for kind, scope, role, member in grants:
        assert role not in PRIMITIVE_ROLES, (kind, scope, role, member)
        assert member not in PUBLIC, (kind, scope, role, member)
    for resource in deployment.resources:  # no public member hides in any input either
        assert not PUBLIC & set(_strings(resource.inputs)), resource.name
    invokers = {
        "cpu": ["group:marin-researchers@example.com"],
        "gpu": ["group:marin-researchers@example.com", "user:ada@example.com"],
    }
    assert grants == {
        ("BucketIAMMember", "my-gcp-project-marin", "roles/storage.objectAdmin", WORKER),
        ("BucketIAMMember", "my-gcp-project-marin", "roles/storage.objectViewer", UI),
        ("RepositoryIamMember", "marin", "roles/artifactregistry.reader", WORKER),
        ("IAMMember", PROJECT, "roles/logging.logWriter", WORKER),
        (
            "IAMMember",
            f"projects/{PROJECT}/serviceAccounts/marin-worker@{PROJECT}.iam.gserviceaccount.com",
            "roles/iam.workloadIdentityUser",
            f"serviceAccount:{PROJECT}.svc.id.goog[marin/marin-worker]",
        ),
        ("SecretIamMember", "marin-ui-token", "roles/secretmanager.secretAccessor", UI),
        *{("ServiceIamMember", "marin-ui", "roles/run.invoker", m) for m in invokers[name]},
    }
    # The UI's identity can read objects and its own token, nothing else.
    assert {role for _, _, role, member in grants if member == UI} == {
        "roles/storage.objectViewer",
        "roles/secretmanager.secretAccessor",
    }
    # The only project-wide grant is the worker's log writer (logs have no narrower scope).
    assert [g for g in grants if g[1] == PROJECT] == [
        ("IAMMember", PROJECT, "roles/logging.logWriter", WORKER)
    ]


@pytest.mark.parametrize(
    ("overrides", "drop", "message"),
    [
        (
            {"marin-infra:gpuCount": 8},
            (),
            r"^marin-infra:gpuCount: is 8 but gpuType is not set; set marin-infra:gpuType",
        ),
        (
            {"marin-infra:gpuType": "nvidia-l4"},
            (),
            r"^marin-infra:gpuCount: is required with gpuType='nvidia-l4'",
        ),
        (
            {"marin-infra:gpuType": "h100", "marin-infra:gpuCount": 8},
            (),
            r"^marin-infra:gpuType: 'h100' is not a GKE accelerator type",
        ),
        (
            {"marin-infra:region": "us-central1-a"},
            (),
            r"^marin-infra:region: 'us-central1-a' is not a Google Cloud region .*is a zone, its "
            r"region is 'us-central1'",
        ),
        (
            {"marin-infra:region": "US Central"},
            (),
            r"^marin-infra:region: 'US Central' is not a Google Cloud region like 'us-central1'",
        ),
        (
            {"marin-infra:zones": ["europe-west4-a"]},
            (),
            r"^marin-infra:zones: 'europe-west4-a' is not a zone of region 'us-central1'",
        ),
        (
            {"marin-infra:uiInvokers": ["allUsers"]},
            (),
            r"^marin-infra:uiInvokers: 'allUsers' would make the UI public",
        ),
        (
            {"marin-infra:uiInvokers": ["ada@example.com"]},
            (),
            r"^marin-infra:uiInvokers: 'ada@example.com' is not an IAM member",
        ),
        ({"marin-infra:cpuPool": {"minNodes": 0}}, (), r"^marin-infra:cpuPool.minNodes: must be >= 1"),
        (
            {"marin-infra:cpuPool": {"replicas": 9}},
            (),
            r"^marin-infra:cpuPool.replicas: 9 Ray pods need 9 nodes; maxNodes is 8",
        ),
        (
            {"marin-infra:cpuPool": {"rayMemory": "32GB"}},
            (),
            r"^marin-infra:cpuPool.rayMemory: '32GB' is not a Kubernetes memory quantity",
        ),
        (
            {"marin-infra:spotPool": {"machinetype": "n2"}},
            (),
            r"^marin-infra:spotPool.machinetype: is not a pool setting",
        ),
        (
            {"marin-infra:gpuCuont": 8},
            (),
            r"^marin-infra:gpuCuont: is not a setting of this program; did you mean marin-infra:gpuCount\?",
        ),
        (
            {"marin-infra:gcSchedule": "weekly"},
            (),
            r"^marin-infra:gcSchedule: 'weekly' is not a cron schedule like '0 3 \* \* 0'",
        ),
        (
            {"marin-infra:gcKeepLatest": 2},
            (),
            r"^marin-infra:gcKeepLatest: is 2 but gcSchedule is not set",
        ),
        (
            {"marin-infra:gcSchedule": "@daily", "marin-infra:gcKeepLatest": 0},
            (),
            r"^marin-infra:gcKeepLatest: 0 is not an integer >= 1",
        ),
        (
            {"marin-infra:supersededGcSchedule": "0 3 * * 0"},
            (),
            r"^marin-infra:supersededGcSchedule: is not a setting of this program; did you mean "
            r"marin-infra:gcSchedule\?",
        ),
        (
            {"marin-infra:bucketName": "Marin_Bucket"},
            (),
            r"^marin-infra:bucketName: 'Marin_Bucket' is not a valid bucket name",
        ),
    ],
)
def test_bad_config_fails_naming_the_key(overrides, drop, message):
    from marin_infra.settings import InfraConfigError

    with pytest.raises(InfraConfigError, match=message):
        run_stack("cpu", overrides, drop)


def test_missing_required_keys_are_named_by_pulumi():
    with pytest.raises(pulumi.ConfigMissingError, match="marin-infra:uiToken"):
        run_stack("cpu", drop=("marin-infra:uiToken",))
    with pytest.raises(pulumi.ConfigMissingError, match="marin-infra:bucketName"):
        run_stack("cpu", drop=("marin-infra:bucketName",))


def test_the_mock_run_needs_no_pulumi_cli(tmp_path):
    """Pulumi's SDK mocks stand in for the engine: the program runs with no `pulumi` binary on PATH."""
    code = "from stack_runner import run_stack; d = run_stack('gpu'); print(len(d.resources), d.outputs['marinPrefix'])"
    env = {
        **os.environ,
        "PATH": str(tmp_path),
        "PYTHONPATH": os.pathsep.join([str(ROOT / "tests" / "infra"), str(ROOT / "src")]),
    }
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=INFRA,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["30", "gs://my-gcp-project-marin"]


def test_the_docs_target_urns_name_the_registry_and_what_it_needs(gpu):
    import re

    doc = (ROOT / "docs" / "infra.md").read_text()
    targets = re.findall(r"--target '([^']+)'", doc)
    assert len(targets) == 2
    declared = {r.urn for r in gpu.resources}
    for urn in [*targets, *re.findall(r"pulumi state delete '([^']+)'", doc)]:
        assert urn in declared, urn
    # Creating the targets alone is possible: they depend on nothing else.
    repository = gpu.one(":Repository")
    assert repository.dependencies == {
        "urn:pulumi:gpu::marin-infra::gcp:projects/service:Service::artifactregistry"
    }


def test_project_file_names_the_config_namespace_and_the_repos_environment():
    from marin_infra.settings import NAMESPACE

    project = yaml.safe_load((INFRA / "Pulumi.yaml").read_text())
    assert project["name"] == NAMESPACE  # stack config keys are `<project name>:<key>`
    assert project["runtime"]["name"] == "python"
    assert (INFRA / project["runtime"]["options"]["virtualenv"]).resolve() == ROOT / ".venv"


def test_the_docs_config_table_lists_exactly_the_programs_keys():
    import re

    from marin_infra.settings import KEYS

    doc = (ROOT / "docs" / "infra.md").read_text()
    table = doc[doc.index("| Key | Required | Meaning |") : doc.index("A bad value fails before")]
    assert re.findall(r"^\| `(\w+)` \|", table, re.MULTILINE) == list(KEYS)
