"""A stack's config (`marin-infra:*` keys), read and checked before any resource is declared.

Every error names the key to fix, e.g. `marin-infra:gpuCount`, and says what to set.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi.runtime.config

NAMESPACE = "marin-infra"
# A Google Cloud region: us-central1, europe-west4, northamerica-northeast1. Not a zone (us-central1-a).
_REGION = re.compile(r"^[a-z]+(-[a-z]+)+[0-9]+$")
_ZONE = re.compile(r"^[a-z]+(-[a-z]+)+[0-9]+-[a-z]$")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$")
_GPU_TYPE = re.compile(r"^nvidia-[a-z0-9-]+$")
_QUANTITY = re.compile(r"^[0-9]+(Mi|Gi|Ti)$")
_CRON = re.compile(r"^(@(hourly|daily|weekly|monthly)|[0-9*/,-]+( [0-9*/,-]+){4})$")
PUBLIC_MEMBERS = ("allUsers", "allAuthenticatedUsers")
_MEMBER_KINDS = ("user:", "group:", "serviceAccount:", "domain:")


class InfraConfigError(ValueError):
    """A stack config value that cannot provision a working environment; the message names the key."""


def _fail(key: str, message: str) -> InfraConfigError:
    return InfraConfigError(f"{NAMESPACE}:{key}: {message}")


@dataclass(frozen=True)
class Pool:
    """A GKE node pool and the Ray worker group whose pods fill it (one pod per node)."""

    machine_type: str
    min_nodes: int
    max_nodes: int
    ray_cpu: int  # what each Ray pod requests; it must fit the machine with room for GKE's own pods
    ray_memory: str
    replicas: int = 0  # Ray pods started at once (the autoscaler adds the rest on demand)


@dataclass(frozen=True)
class Settings:
    """Everything the program provisions from, validated."""

    project: str
    region: str
    bucket_name: str
    cluster_name: str
    zones: tuple[str, ...]
    cpu_pool: Pool
    spot_pool: Pool | None
    gpu_type: str | None
    gpu_count: int
    gpu_pool: Pool | None
    image_tag: str
    kuberay_version: str
    ui_invokers: tuple[str, ...]
    ui_token: pulumi.Output[str]
    gc_schedule: str | None
    gc_keep_latest: int

    @property
    def gpu_group_name(self) -> str:
        """The Ray worker group of the GPU pool: gpu-h100 for nvidia-h100-80gb, gpu-l4 for nvidia-l4."""
        assert self.gpu_type is not None
        model = self.gpu_type.removeprefix("nvidia-").removeprefix("tesla-").split("-")[0]
        return f"gpu-{model}"


def _int(key: str, raw: Any, minimum: int) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < minimum:
        raise _fail(key, f"{raw!r} is not an integer >= {minimum}")
    return raw


def _pool(key: str, raw: Mapping[str, Any] | None, defaults: Mapping[str, Any]) -> Pool:
    values = {**defaults, **(raw or {})}
    unknown = sorted(set(values) - {"machineType", "minNodes", "maxNodes", "rayCpu", "rayMemory", "replicas"})
    if unknown:
        raise _fail(
            f"{key}.{unknown[0]}",
            "is not a pool setting (machineType, minNodes, maxNodes, rayCpu, rayMemory, replicas)",
        )
    if not values.get("machineType"):
        raise _fail(f"{key}.machineType", "is required (a Compute Engine machine type, e.g. n2-standard-16)")
    pool = Pool(
        machine_type=str(values["machineType"]),
        min_nodes=_int(f"{key}.minNodes", values.get("minNodes", 0), 0),
        max_nodes=_int(f"{key}.maxNodes", values.get("maxNodes"), 1),
        ray_cpu=_int(f"{key}.rayCpu", values.get("rayCpu"), 1),
        ray_memory=str(values.get("rayMemory")),
        replicas=_int(f"{key}.replicas", values.get("replicas", 0), 0),
    )
    if not _QUANTITY.match(pool.ray_memory):
        raise _fail(
            f"{key}.rayMemory", f"{pool.ray_memory!r} is not a Kubernetes memory quantity like '32Gi'"
        )
    if pool.min_nodes > pool.max_nodes:
        raise _fail(f"{key}.minNodes", f"{pool.min_nodes} exceeds maxNodes={pool.max_nodes}")
    if pool.replicas > pool.max_nodes:
        raise _fail(
            f"{key}.replicas",
            f"{pool.replicas} Ray pods need {pool.replicas} nodes; maxNodes is {pool.max_nodes}",
        )
    return pool


CPU_POOL_DEFAULTS = {
    "machineType": "n2-standard-16",
    "minNodes": 1,
    "maxNodes": 8,
    "rayCpu": 8,
    "rayMemory": "32Gi",
    "replicas": 1,
}
SPOT_POOL_DEFAULTS = {
    "machineType": "n2-standard-16",
    "minNodes": 0,
    "maxNodes": 16,
    "rayCpu": 8,
    "rayMemory": "32Gi",
}
GPU_POOL_DEFAULTS = {"minNodes": 0, "maxNodes": 4, "rayCpu": 16, "rayMemory": "128Gi"}


KEYS = (
    "project",
    "region",
    "zones",
    "bucketName",
    "uiToken",
    "clusterName",
    "cpuPool",
    "spotPool",
    "gpuType",
    "gpuCount",
    "gpuPool",
    "uiInvokers",
    "imageTag",
    "kuberayVersion",
    "gcSchedule",
    "gcKeepLatest",
)


def _check_no_unknown_keys() -> None:
    """A misspelt key (`gpuCuont`) would otherwise be ignored and silently provision less."""
    # The stack's config as the Pulumi engine handed it to this process.
    given = set(pulumi.runtime.config.CONFIG.get()) | set(pulumi.runtime.config.get_config_env())
    for full in sorted(given):
        namespace, _, key = full.partition(":")
        if namespace == NAMESPACE and key not in KEYS:
            close = difflib.get_close_matches(key, KEYS, n=1)
            hint = f"; did you mean {NAMESPACE}:{close[0]}?" if close else f"; the keys are {', '.join(KEYS)}"
            raise _fail(key, f"is not a setting of this program{hint}")


def load(config: pulumi.Config) -> Settings:
    """Read and check the stack's `marin-infra:*` config; raises InfraConfigError naming the bad key."""
    _check_no_unknown_keys()
    region = config.require("region")
    if not _REGION.match(region):
        hint = (
            f"; {region!r} is a zone, its region is {region.rsplit('-', 1)[0]!r}"
            if _ZONE.match(region)
            else ""
        )
        raise _fail(
            "region", f"{region!r} is not a Google Cloud region like 'us-central1' or 'europe-west4'{hint}"
        )
    zones = tuple(config.get_object("zones") or ())
    for zone in zones:
        if not (isinstance(zone, str) and _ZONE.match(zone) and zone.rsplit("-", 1)[0] == region):
            raise _fail("zones", f"{zone!r} is not a zone of region {region!r} (like '{region}-a')")
    bucket = config.require("bucketName")
    if not _BUCKET.match(bucket) or "goog" in bucket:
        raise _fail("bucketName", f"{bucket!r} is not a valid bucket name (3-63 of a-z 0-9 . _ -, no 'goog')")

    cpu_pool = _pool("cpuPool", config.get_object("cpuPool"), CPU_POOL_DEFAULTS)
    if cpu_pool.min_nodes < 1:
        raise _fail(
            "cpuPool.minNodes", "must be >= 1: the Ray head and the KubeRay operator run on this pool"
        )
    spot_raw = config.get_object("spotPool")
    spot_pool = _pool("spotPool", spot_raw, SPOT_POOL_DEFAULTS) if spot_raw is not None else None

    gpu_type = config.get("gpuType")
    gpu_count = config.get_int("gpuCount")
    gpu_raw = config.get_object("gpuPool")
    if gpu_type is None:
        if gpu_count is not None:
            raise _fail(
                "gpuCount",
                f"is {gpu_count} but gpuType is not set; set {NAMESPACE}:gpuType (e.g. "
                "nvidia-h100-80gb) or remove gpuCount",
            )
        if gpu_raw is not None:
            raise _fail(
                "gpuPool",
                f"is set but gpuType is not; set {NAMESPACE}:gpuType (e.g. nvidia-h100-80gb) or remove gpuPool",
            )
        gpu_pool = None
    else:
        if not _GPU_TYPE.match(gpu_type):
            raise _fail(
                "gpuType",
                f"{gpu_type!r} is not a GKE accelerator type like 'nvidia-h100-80gb' or 'nvidia-l4'",
            )
        if gpu_count is None:
            raise _fail("gpuCount", f"is required with gpuType={gpu_type!r}: the GPUs on each node (e.g. 8)")
        _int("gpuCount", gpu_count, 1)
        gpu_pool = _pool("gpuPool", gpu_raw, GPU_POOL_DEFAULTS)

    invokers = tuple(config.get_object("uiInvokers") or ())
    for member in invokers:
        if member in PUBLIC_MEMBERS:
            raise _fail(
                "uiInvokers", f"{member!r} would make the UI public; name users, groups or a domain instead"
            )
        if not (isinstance(member, str) and member.startswith(_MEMBER_KINDS)):
            raise _fail(
                "uiInvokers",
                f"{member!r} is not an IAM member like 'group:ml@example.com' or 'user:ada@example.com'",
            )

    gc_schedule = config.get("gcSchedule")
    if gc_schedule is not None and not _CRON.match(gc_schedule):
        raise _fail(
            "gcSchedule",
            f"{gc_schedule!r} is not a cron schedule like '0 3 * * 0' (Sundays 03:00 UTC) or '@weekly'",
        )
    gc_keep_latest = config.get_int("gcKeepLatest")
    if gc_keep_latest is not None and gc_schedule is None:
        raise _fail(
            "gcKeepLatest",
            f"is {gc_keep_latest!r} but gcSchedule is not set; set {NAMESPACE}:gcSchedule (e.g. "
            "'0 3 * * 0') or remove gcKeepLatest",
        )

    return Settings(
        project=config.require("project"),
        region=region,
        bucket_name=bucket,
        cluster_name=config.get("clusterName") or "marin",
        zones=zones,
        cpu_pool=cpu_pool,
        spot_pool=spot_pool,
        gpu_type=gpu_type,
        gpu_count=gpu_count or 0,
        gpu_pool=gpu_pool,
        image_tag=config.get("imageTag") or "latest",
        kuberay_version=config.get("kuberayVersion") or "1.5.1",
        ui_invokers=invokers,
        ui_token=config.require_secret("uiToken"),
        gc_schedule=gc_schedule,
        gc_keep_latest=_int("gcKeepLatest", gc_keep_latest, 1) if gc_keep_latest is not None else 1,
    )
