"""Training metrics: `metrics.jsonl` (numbered parts on object stores), optional TensorBoard / W&B,
and the FLOP accounting behind MFU.

MFU = (tokens/s · `ModelConfig.flops_per_token(seq_len)`) / (peak FLOP/s of the devices in use).
The peak is, in order: `TrainConfig.peak_flops_per_device`, the `MARIN_PEAK_FLOPS` environment
variable, the dense bf16 figure of a known CUDA device (`CUDA_PEAK_BF16`), and on CPU an estimate of
cores × 2.5 GHz × 32 float32 FLOPs per cycle (two AVX2 FMA units); state yours when you quote MFU.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import Any

import torch

import storage

# Dense (not sparse) bf16 tensor-core peaks in FLOP/s, from the vendors' datasheets; matched by
# substring of torch.cuda.get_device_name(), most specific first.
CUDA_PEAK_BF16: tuple[tuple[str, float], ...] = (
    ("GB200", 2.5e15),
    ("B200", 2.25e15),
    ("H200", 989e12),
    ("H100 PCIe", 756e12),
    ("H100", 989e12),
    ("H800", 989e12),
    ("A100", 312e12),
    ("A800", 312e12),
    ("L40S", 362e12),
    ("L40", 181e12),
    ("L4", 121e12),
    ("A10G", 70e12),
    ("A10", 125e12),
    ("RTX 4090", 165e12),
    ("RTX 3090", 71e12),
    ("V100", 125e12),
)

CPU_FLOPS_PER_CORE = 2.5e9 * 32


def peak_flops_per_device(device: torch.device, override: float | None = None) -> float:
    """The peak FLOP/s of one device used for MFU (see the module docstring for the order)."""
    if override:
        return float(override)
    if os.environ.get("MARIN_PEAK_FLOPS"):
        return float(os.environ["MARIN_PEAK_FLOPS"])
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        for key, flops in CUDA_PEAK_BF16:
            if key in name:
                return flops
        warnings.warn(
            f"unknown CUDA device {name!r}: set MARIN_PEAK_FLOPS for a meaningful MFU", stacklevel=2
        )
        return float("nan")
    return torch.get_num_threads() * CPU_FLOPS_PER_CORE


class MetricsLog:
    """The run's metrics: one JSON object per record in `metrics.jsonl`, mirrored to TensorBoard / W&B
    if asked.

    A `storage.RecordLog`: on local disk each record is appended to `metrics.jsonl` as it comes; on
    an object store records are buffered and written as numbered whole parts (`metrics-00000.jsonl`,
    ...) at each `flush()` (the trainer flushes before every checkpoint), every `flush_every`
    records, and at `close()`, so the bytes written grow linearly with the steps. Read either layout
    with `storage.read_records(path)`.
    """

    def __init__(
        self,
        path: str,
        *,
        loggers: Sequence[str] = (),
        run_name: str = "",
        config: dict | None = None,
        flush_every: int = 100,
    ):
        self.path = path
        self.flush_every = flush_every
        self._log = storage.RecordLog(path)
        self._unflushed = 0
        storage.makedirs(storage.parent(path))
        self._tensorboard = None
        self._wandb = None
        for name in loggers:
            if name == "tensorboard":
                self._tensorboard = _open_tensorboard(storage.join(storage.parent(path), "tensorboard"))
            elif name == "wandb":
                self._wandb = _open_wandb(run_name, config or {})
            else:
                raise ValueError(f"unknown logger {name!r}; use 'tensorboard' or 'wandb'")

    def truncate_after(self, step: int) -> None:
        """Drop records of steps after `step` (a resumed run writes them again)."""
        self._log.keep_only(lambda r: isinstance(r.get("step"), int) and r["step"] <= step)

    def read(self) -> list[dict[str, Any]]:
        """All records so far."""
        return self._log.read()

    def write(self, record: dict[str, Any]) -> None:
        """Add `record` (it must hold "step"): on disk at once locally, at the next flush on a store."""
        self._log.append(record)
        self._unflushed += 1
        if self._unflushed >= self.flush_every:
            self.flush()
        step = record["step"]
        numbers = {k: v for k, v in record.items() if isinstance(v, int | float) and k != "step"}
        if self._tensorboard is not None:
            for key, value in numbers.items():
                self._tensorboard.add_scalar(key, value, step)
        if self._wandb is not None:
            self._wandb.log(numbers, step=step)

    def flush(self) -> None:
        """Write the buffered records (one part on an object store; nothing to do locally)."""
        self._log.flush()
        self._unflushed = 0

    def close(self) -> None:
        """Flush the records, and flush and close the optional loggers."""
        self.flush()
        if self._tensorboard is not None:
            self._tensorboard.close()
        if self._wandb is not None:
            self._wandb.finish()


def _open_tensorboard(log_dir: str):
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        warnings.warn(
            "TensorBoard logging was asked for but tensorboard is not installed; skipping", stacklevel=3
        )
        return None
    return SummaryWriter(log_dir=log_dir)


def _open_wandb(run_name: str, config: dict):
    try:
        import wandb
    except ImportError:
        warnings.warn("W&B logging was asked for but wandb is not installed; skipping", stacklevel=3)
        return None
    return wandb.init(project=os.environ.get("WANDB_PROJECT", "marin"), name=run_name, config=config)
