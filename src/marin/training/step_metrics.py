"""One `metrics.jsonl` record per optimizer step: loss, learning rate, gradient norm and throughput."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from marin.training.config import TrainConfig
from marin.training.metrics import peak_flops_per_device
from marin.training.models import ModelConfig


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
        cls, config: TrainConfig, model: ModelConfig, device: torch.device, world_size: int
    ) -> StepMetrics:
        """The figures of a run of `config` training `model` on `world_size` devices like `device`."""
        return cls(
            tokens_per_step=config.batch_size * config.seq_len,
            flops_per_token=model.flops_per_token(config.seq_len),
            peak_flops=peak_flops_per_device(device, config.peak_flops) * world_size,
            world_size=world_size,
            grad_accum_steps=config.grad_accum_steps,
            parallelism=str(config.parallelism),
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
