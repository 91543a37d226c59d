"""ResourceConfig: what a step needs to run, checked when it is declared, not when it is dispatched."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from fray.cluster.errors import ResourceConfigError

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "t": 1000**4,
    "tb": 1000**4,
    "ki": 1024,
    "kib": 1024,
    "mi": 1024**2,
    "mib": 1024**2,
    "gi": 1024**3,
    "gib": 1024**3,
    "ti": 1024**4,
    "tib": 1024**4,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+-]*$")
_TPU_TYPE = re.compile(r"^v\d+[a-z]*(?:-\d+)?$")
_TOPOLOGY = re.compile(r"^\d+(?:x\d+){1,2}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A region is matched against a node label, so it must be a valid label value (Kubernetes' and Ray's rule).
_REGION = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")


def parse_size(value: int | str | None, field_name: str) -> int | None:
    """Bytes from `4GiB`, `512MB`, `1.5G`, `2Gi` or an int of bytes; None stays None."""
    if value is None:
        return None
    hint = "write it like '4GiB' or '512MB' or an int of bytes"
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ResourceConfigError(f"{field_name}={value!r} is not a size; {hint}")
    if isinstance(value, int):
        if value < 0:
            raise ResourceConfigError(f"{field_name}={value!r} is negative; {hint}")
        return value
    match = _SIZE.match(value)
    unit = match and _UNITS.get(match.group(2).lower())
    if not match or unit is None:
        raise ResourceConfigError(f"{field_name}={value!r} is not a size; {hint}")
    return int(float(match.group(1)) * unit)


def format_size(n: int) -> str:
    """A byte count in binary units: exact when it is whole ('4GiB'), else to one decimal ('32.4GiB')."""
    for unit, scale in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= scale:
            return f"{n // scale}{unit}" if n % scale == 0 else f"{n / scale:.1f}{unit}"
    return f"{n}B"


@dataclass(frozen=True)
class CpuConfig:
    """No accelerator: the step runs on CPUs only."""

    kind = "cpu"

    def to_json(self) -> dict[str, Any]:
        return {"kind": "cpu"}


@dataclass(frozen=True)
class GpuConfig:
    """`count` GPUs of `type` (e.g. 'H100', 'A100-80G'); type 'auto' takes whichever GPU a node has."""

    type: str = "auto"
    count: int = 1
    kind = "gpu"

    def __post_init__(self) -> None:
        if not isinstance(self.type, str) or not _NAME.match(self.type):
            raise ResourceConfigError(
                f"GpuConfig type={self.type!r} is not a GPU type; write it like 'H100', 'A100' or 'auto'"
            )
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
            raise ResourceConfigError(
                f"GpuConfig count={self.count!r} must be a whole number >= 1, e.g. count=8"
            )

    def to_json(self) -> dict[str, Any]:
        return {"kind": "gpu", "type": self.type, "count": self.count}


@dataclass(frozen=True)
class TpuConfig:
    """A TPU slice of `type` (e.g. 'v4-8', 'v5e-16') with an optional `topology` such as '2x2x1'."""

    type: str
    topology: str | None = None
    kind = "tpu"

    def __post_init__(self) -> None:
        if not isinstance(self.type, str) or not _TPU_TYPE.match(self.type):
            raise ResourceConfigError(
                f"TpuConfig type={self.type!r} is not a TPU type; write it like 'v4-8' or 'v5e-16'"
            )
        if self.topology is not None and (
            not isinstance(self.topology, str) or not _TOPOLOGY.match(self.topology)
        ):
            raise ResourceConfigError(
                f"TpuConfig topology={self.topology!r} is not a topology; write it like '2x2' or '2x2x1'"
            )

    @property
    def generation(self) -> str:
        """The TPU generation, e.g. 'v4' for 'v4-8'."""
        return self.type.split("-")[0]

    @property
    def cores(self) -> int | None:
        """The core count named by the type's suffix ('v4-8' -> 8), or None when it names none."""
        _, _, suffix = self.type.partition("-")
        return int(suffix) if suffix else None

    def to_json(self) -> dict[str, Any]:
        return {"kind": "tpu", "type": self.type, "topology": self.topology}


DeviceConfig = CpuConfig | GpuConfig | TpuConfig


class GangPlacement(StrEnum):
    """How the replicas of a multi-host step (`replicas > 1`) are placed on a Ray cluster's nodes
    (Ray's placement group strategies): SPREAD over nodes where it can, PACK onto few where it can,
    STRICT_PACK all on one node, STRICT_SPREAD each on its own node."""

    SPREAD = "SPREAD"
    PACK = "PACK"
    STRICT_PACK = "STRICT_PACK"
    STRICT_SPREAD = "STRICT_SPREAD"


@dataclass(frozen=True)
class ResourceConfig:
    """The resources one step asks for.

    `cpu` cores (fractions allowed); `ram` and `disk` as sizes ('4GiB', '512MB' or bytes; stored as
    bytes); `device` CpuConfig(), GpuConfig(type, count) or TpuConfig(type, topology);
    `preemptible` whether the step may run on workers that can vanish (a preempted attempt is
    retried; False keeps it off nodes labelled preemptible); `regions` the cloud regions it may run
    in (empty: anywhere; see fray.cluster.placement for how clusters apply both); `replicas` how many hosts a multi-host
    step spans (each replica gets the rest of the request; see fray.cluster.gang), `gang_placement` how
    a RayCluster places them, `elastic` whether a retried gang may run with fewer replicas when the
    cluster no longer holds them all; `env_vars` set in the process that runs the step; `pip_packages` pip requirements
    the step needs beyond the base environment (installed by RayCluster, checked by LocalCluster).
    """

    cpu: float = 1.0
    ram: int | str | None = None
    disk: int | str | None = None
    device: DeviceConfig = field(default_factory=CpuConfig)
    preemptible: bool = True
    regions: Sequence[str] = ()
    replicas: int = 1
    env_vars: Mapping[str, str] = field(default_factory=dict)
    pip_packages: Sequence[str] = ()
    gang_placement: GangPlacement = GangPlacement.SPREAD
    elastic: bool = False

    def __post_init__(self) -> None:
        if (
            isinstance(self.cpu, bool)
            or not isinstance(self.cpu, (int, float))
            or not math.isfinite(self.cpu)
        ):
            raise ResourceConfigError(
                f"cpu={self.cpu!r} is not a number of cores; write it like cpu=4 or cpu=0.5"
            )
        if self.cpu < 0:
            raise ResourceConfigError(f"cpu={self.cpu!r} is negative; ask for 0 or more cores, e.g. cpu=1")
        object.__setattr__(self, "cpu", float(self.cpu))
        object.__setattr__(self, "ram", parse_size(self.ram, "ram"))
        object.__setattr__(self, "disk", parse_size(self.disk, "disk"))
        if not isinstance(self.device, (CpuConfig, GpuConfig, TpuConfig)):
            raise ResourceConfigError(
                f"device={self.device!r} is not a device; use CpuConfig(), GpuConfig('H100', 8) or "
                "TpuConfig('v4-8'), or the constructors ResourceConfig.with_gpu / with_tpu"
            )
        if not isinstance(self.elastic, bool):
            raise ResourceConfigError(f"elastic={self.elastic!r} must be True or False")
        if not isinstance(self.preemptible, bool):
            raise ResourceConfigError(f"preemptible={self.preemptible!r} must be True or False")
        object.__setattr__(self, "regions", _regions(self.regions))
        if isinstance(self.replicas, bool) or not isinstance(self.replicas, int) or self.replicas < 1:
            raise ResourceConfigError(
                f"replicas={self.replicas!r} must be a whole number >= 1, e.g. replicas=2"
            )
        try:
            object.__setattr__(self, "gang_placement", GangPlacement(self.gang_placement))
        except ValueError:
            raise ResourceConfigError(
                f"gang_placement={self.gang_placement!r} is not one of {', '.join(GangPlacement)}"
            ) from None
        object.__setattr__(self, "env_vars", _env_vars(self.env_vars))
        object.__setattr__(self, "pip_packages", _requirements(self.pip_packages))

    def __hash__(self) -> int:
        # env_vars is a dict, so the generated hash would fail; hash the canonical JSON form instead.
        return hash(repr(sorted(self.to_json().items(), key=lambda kv: kv[0])))

    @classmethod
    def with_cpu(cls, cpu: float = 1.0, *, ram: int | str | None = None, **kwargs: Any) -> ResourceConfig:
        """A CPU-only request: `cpu` cores and optionally `ram`, `disk` and the other fields."""
        return cls(cpu=cpu, ram=ram, device=CpuConfig(), **kwargs)

    @classmethod
    def with_gpu(
        cls, type: str = "auto", count: int = 1, *, cpu: float = 1.0, **kwargs: Any
    ) -> ResourceConfig:
        """`count` GPUs of `type` ('H100', 'A100', or 'auto' for any), plus `cpu` cores and other fields."""
        return cls(cpu=cpu, device=GpuConfig(type=type, count=count), **kwargs)

    @classmethod
    def with_tpu(
        cls, type: str, topology: str | None = None, *, cpu: float = 1.0, **kwargs: Any
    ) -> ResourceConfig:
        """A TPU slice of `type` ('v4-8', 'v5e-16') with an optional `topology` ('2x2x1')."""
        return cls(cpu=cpu, device=TpuConfig(type=type, topology=topology), **kwargs)

    @property
    def gpu_count(self) -> int:
        """GPUs asked for; 0 unless the device is a GpuConfig."""
        return self.device.count if isinstance(self.device, GpuConfig) else 0

    def to_json(self) -> dict[str, Any]:
        """A JSON form for provenance records (sizes in bytes)."""
        return {
            "cpu": self.cpu,
            "ram": self.ram,
            "disk": self.disk,
            "device": self.device.to_json(),
            "preemptible": self.preemptible,
            "regions": list(self.regions),
            "replicas": self.replicas,
            "env_vars": dict(sorted(self.env_vars.items())),
            "pip_packages": list(self.pip_packages),
            **(
                {"gang_placement": str(self.gang_placement), "elastic": self.elastic}
                if self.replicas > 1
                else {}
            ),
        }

    def describe(self) -> str:
        """A short human form, e.g. 'cpu=4 ram=16GiB gpu=H100x8'."""
        parts = [f"cpu={self.cpu:g}"]
        if self.ram is not None:
            parts.append(f"ram={format_size(self.ram)}")
        if self.disk is not None:
            parts.append(f"disk={format_size(self.disk)}")
        if isinstance(self.device, GpuConfig):
            parts.append(f"gpu={self.device.type}x{self.device.count}")
        elif isinstance(self.device, TpuConfig):
            parts.append(
                f"tpu={self.device.type}" + (f"({self.device.topology})" if self.device.topology else "")
            )
        if self.replicas > 1:
            parts.append(f"replicas={self.replicas}")
        return " ".join(parts)


def _names(value: Any, field_name: str, example: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ResourceConfigError(f"{field_name}={value!r} must be a list or tuple of strings, {example}")
    for item in value:
        if not isinstance(item, str) or not item.strip():
            raise ResourceConfigError(
                f"{field_name} has {item!r}; each entry must be a non-empty string, {example}"
            )
    return tuple(value)


def _regions(value: Any) -> tuple[str, ...]:
    regions = _names(value, "regions", "e.g. regions=('us-central1',)")
    for region in regions:
        if not _REGION.match(region):
            raise ResourceConfigError(
                f"regions has {region!r}, which is not a region name; write it like 'us-central1' "
                "(letters, digits, '-', '_' or '.', at most 63 characters)"
            )
    return regions


def _requirements(value: Any) -> tuple[str, ...]:
    specs = _names(value, "pip_packages", "e.g. ('lm-eval>=0.4',)")
    if not specs:
        return specs
    from packaging.requirements import InvalidRequirement, Requirement

    for spec in specs:
        try:
            Requirement(spec)
        except InvalidRequirement:
            raise ResourceConfigError(
                f"pip_packages has {spec!r}, which is not a pip requirement; write it like 'lm-eval>=0.4'"
            ) from None
    return specs


def _env_vars(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise ResourceConfigError(
            f"env_vars={value!r} must be a mapping of names to strings, e.g. {{'HF_HOME': '/x'}}"
        )
    for key, val in value.items():
        if not isinstance(key, str) or not _ENV_NAME.match(key):
            raise ResourceConfigError(f"env_vars has the name {key!r}; names are letters, digits and '_'")
        if not isinstance(val, str):
            raise ResourceConfigError(
                f"env_vars[{key!r}]={val!r} must be a string; environment values are text, e.g. str({val!r})"
            )
    return dict(value)
