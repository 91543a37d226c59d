"""One `metrics.jsonl` record per optimizer step: loss, learning rate, gradient norm and throughput."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from marin.training.metrics import peak_flops_per_device
from marin.training.models import ModelConfig

# The record's fields that depend on the wall clock: they differ between two runs that compute the same
# thing (a resumed run and an uninterrupted one), and everything else in a record does not.
WALL_CLOCK_FIELDS = frozenset(
    {"tokens_per_s", "mfu", "step_seconds", "data_wait_s", "hardware_flops", "flops_ratio"}
)


@dataclass(frozen=True)
class StepMetrics:
    """What turns a step's loss and wall time into its record: the run's shape and its devices' peak."""

    tokens_per_step: int
    flops_per_token: float
    peak_flops: float  # of all devices of the run together, FLOP/s
    world_size: int
    grad_accum_steps: int
    parallelism: str

    @classmethod
    def of(
        cls,
        model: ModelConfig,
        *,
        batch_size: int,
        seq_len: int,
        device: torch.device,
        world_size: int,
        grad_accum_steps: int = 1,
        parallelism: str = "ddp",
        peak_flops: float | None = None,
    ) -> StepMetrics:
        """The figures of a run training `model` on batches of `batch_size` x `seq_len` tokens, on
        `world_size` devices like `device` (`peak_flops`: one device's, None: looked up)."""
        return cls(
            tokens_per_step=batch_size * seq_len,
            flops_per_token=model.flops_per_token(seq_len),
            peak_flops=peak_flops_per_device(device, peak_flops) * world_size,
            world_size=world_size,
            grad_accum_steps=grad_accum_steps,
            parallelism=str(parallelism),
        )

    def record(
        self, step: int, *, loss: float, lr: float, grad_norm: float, seconds: float, data_wait: float
    ) -> dict:
        """The record of the step that ended at `step` (1-based), which took `seconds` of wall time."""
        tokens_per_s = self.tokens_per_step / seconds
        return {
            "step": step,
            "loss": loss,
            "lr": lr,
            "grad_norm": grad_norm,
            "tokens": step * self.tokens_per_step,
            "tokens_per_s": tokens_per_s,
            "mfu": tokens_per_s * self.flops_per_token / self.peak_flops,
            "step_seconds": seconds,
            "data_wait_s": data_wait,
            "world_size": self.world_size,
            "grad_accum_steps": self.grad_accum_steps,
            "parallelism": self.parallelism,
        }
