"""AdamConfig: AdamW with a warmup-then-decay learning-rate schedule, weight decay on matrices only."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import ClassVar, Literal

import torch
from torch import nn

from marin.execution.arguments import Checked
from marin.training.errors import TrainingConfigError

LrSchedule = Literal["cosine", "linear", "constant"]


@dataclass(frozen=True)
class AdamConfig(Checked):
    """AdamW hyperparameters and the learning-rate schedule.

    `warmup` is a number of steps when ≥ 1, or a fraction of the run when below 1. After warmup the
    rate decays to `min_lr_ratio · learning_rate` at the last step (cosine or linear), or stays put
    (constant). `max_grad_norm` clips the global gradient norm; `None` or 0 turns clipping off.
    """

    # keyed even at their defaults: these keys were published before defaults stayed out (marin.execution.keyed)
    KEYED_AT_DEFAULT: ClassVar[tuple[str, ...]] = (
        "learning_rate",
        "weight_decay",
        "beta1",
        "beta2",
        "epsilon",
        "max_grad_norm",
        "warmup",
        "lr_schedule",
        "min_lr_ratio",
    )

    learning_rate: float = 6e-4
    weight_decay: float = 0.0
    beta1: float = 0.9
    beta2: float = 0.95
    epsilon: float = 1e-8
    max_grad_norm: float | None = 1.0
    warmup: float = 0.01
    lr_schedule: LrSchedule = "cosine"
    min_lr_ratio: float = 0.1

    def __post_init__(self) -> None:
        if not self.learning_rate > 0:
            raise TrainingConfigError(f"AdamConfig.learning_rate must be > 0, got {self.learning_rate!r}")
        if self.weight_decay < 0:
            raise TrainingConfigError(f"AdamConfig.weight_decay must be ≥ 0, got {self.weight_decay!r}")
        for name in ("beta1", "beta2"):
            if not 0 <= getattr(self, name) < 1:
                raise TrainingConfigError(f"AdamConfig.{name} must be in [0, 1), got {getattr(self, name)!r}")
        if self.lr_schedule not in ("cosine", "linear", "constant"):
            raise TrainingConfigError(
                f"AdamConfig.lr_schedule must be 'cosine', 'linear' or 'constant', got {self.lr_schedule!r}"
            )
        if not 0 <= self.min_lr_ratio <= 1:
            raise TrainingConfigError(f"AdamConfig.min_lr_ratio must be in [0, 1], got {self.min_lr_ratio!r}")
        if self.warmup < 0:
            raise TrainingConfigError(
                f"AdamConfig.warmup must be ≥ 0 (steps, or a fraction < 1), got {self.warmup!r}"
            )

    def to_json(self) -> dict:
        """The fields as a JSON object (for a step's hash_attrs)."""
        return asdict(self)

    def warmup_steps(self, num_train_steps: int) -> int:
        """Warmup length in steps for a run of `num_train_steps`."""
        if self.warmup < 1:
            return int(self.warmup * num_train_steps)
        return int(self.warmup)

    def lr_at(self, step: int, num_train_steps: int) -> float:
        """The learning rate for optimizer step `step` (0-based) of a run of `num_train_steps`."""
        warmup = self.warmup_steps(num_train_steps)
        if step < warmup:
            return self.learning_rate * (step + 1) / warmup
        if self.lr_schedule == "constant":
            return self.learning_rate
        decay_steps = max(1, num_train_steps - 1 - warmup)
        progress = min(1.0, (step - warmup) / decay_steps)
        if self.lr_schedule == "cosine":
            factor = 0.5 * (1.0 + math.cos(math.pi * progress))
        else:
            factor = 1.0 - progress
        return self.learning_rate * (self.min_lr_ratio + (1.0 - self.min_lr_ratio) * factor)

    def build(self, model: nn.Module, *, fused: bool = False) -> torch.optim.AdamW:
        """AdamW over `model`'s parameters; weight decay applies to matrices (dim ≥ 2) only.

        Parameter groups are ordered by `named_parameters()`, so the optimizer state lines up by
        index with the model whatever the number of processes that trained it.
        """
        decay, no_decay = [], []
        for param in model.parameters():
            if param.requires_grad:
                (decay if param.dim() >= 2 else no_decay).append(param)
        groups = [
            {"params": decay, "weight_decay": self.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ]
        kwargs = {"fused": True} if fused else {"foreach": True}
        return torch.optim.AdamW(
            groups, lr=self.learning_rate, betas=(self.beta1, self.beta2), eps=self.epsilon, **kwargs
        )


def set_learning_rate(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Set every parameter group's learning rate (the schedule is explicit, a function of the step)."""
    for group in optimizer.param_groups:
        group["lr"] = lr
