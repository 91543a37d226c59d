"""What one machine offers: CPU cores, memory and GPUs, and whether a ResourceConfig could ever fit."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

from fray.cluster.resource_config import GpuConfig, ResourceConfig, TpuConfig, format_size


@dataclass(frozen=True)
class Capacity:
    """Totals of one machine (or the share of it a LocalCluster may use)."""

    cpu: float
    ram: int
    gpus: int

    @classmethod
    def of_this_machine(cls) -> Capacity:
        """Cores this process may use, total memory, and GPUs (CUDA_VISIBLE_DEVICES or nvidia-smi)."""
        try:
            cpu = len(os.sched_getaffinity(0))
        except AttributeError:
            cpu = os.cpu_count() or 1
        import psutil  # lazy: only building a LocalCluster needs it, and importing fray should stay cheap

        return cls(cpu=float(cpu), ram=psutil.virtual_memory().total, gpus=count_gpus())

    def why_never_fits(self, resources: ResourceConfig) -> str | None:
        """The reason `resources` can never run here, or None when it fits an idle machine."""
        device = resources.device
        if isinstance(device, TpuConfig):
            return f"it asks for a TPU ({device.type}) and this machine has none"
        if isinstance(device, GpuConfig) and device.count > self.gpus:
            return f"it asks for {device.count} GPU(s) ({device.type}) and this machine has {self.gpus}"
        if resources.cpu > self.cpu:
            return f"it asks for cpu={resources.cpu:g} and this machine has {self.cpu:g} cores"
        if resources.ram is not None and resources.ram > self.ram:
            return (
                f"it asks for ram={format_size(resources.ram)} and this machine has {format_size(self.ram)}"
            )
        return None


def count_gpus() -> int:
    """NVIDIA GPUs visible to this process, without importing torch (CUDA_VISIBLE_DEVICES wins)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip() and d.strip() != "-1"])
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))
