"""Skipping bad steps: no update when the loss is not finite, or spikes above k times its running mean.

`SkipBadSteps` wraps the run's torch optimizer (as OLMo-core's `SkipStepOptimizer` does): the trainer
tells it each step's loss and gradient norm, agreed over the processes, before `step()`, which then
does nothing on a bad step; `BadStepGuard` is the judge.

The running mean is an exponential average of the losses of the steps that were taken (decay
`MEAN_DECAY`, about the last 100 steps, bias-corrected); a loss is judged against it only once
`MIN_STEPS` steps have been taken. A non-finite loss or gradient norm is always skipped. A skipped
step leaves the weights, the optimizer state and the EMA as they were; the batch is still consumed,
so the data order and the schedule stay those of the run without the skip. The state is a few
numbers in `state.json`, so a resumed run judges exactly as the run it continues.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

MEAN_DECAY = 0.99
MIN_STEPS = 20


@dataclass
class BadStepGuard:
    """Decides, step by step, whether to skip the update (see the module docstring)."""

    factor: float  # > 1: TrainConfig checks it
    mean: float = 0.0  # the biased running mean of taken steps' losses
    taken: int = 0
    skipped: int = 0

    @property
    def running_mean(self) -> float:
        """The bias-corrected running mean of the taken steps' losses (nan before any)."""
        return self.mean / (1 - MEAN_DECAY**self.taken) if self.taken else math.nan

    def should_skip(self, loss: float, grad_norm: float = 0.0) -> bool:
        """Whether to skip the step with this loss and gradient norm; records the decision."""
        spike = self.taken >= MIN_STEPS and loss > self.factor * self.running_mean
        if not math.isfinite(loss) or not math.isfinite(grad_norm) or spike:
            self.skipped += 1
            return True
        self.mean = MEAN_DECAY * self.mean + (1 - MEAN_DECAY) * loss
        self.taken += 1
        return False

    def state_dict(self) -> dict[str, float | int]:
        return asdict(self)

    def load_state_dict(self, state: dict[str, float | int]) -> None:
        self.mean, self.taken, self.skipped = float(state["mean"]), int(state["taken"]), int(state["skipped"])


class SkipBadSteps:
    """The run's optimizer, whose `step()` leaves the weights and its state as they were on a step
    `judge` found bad (see the module docstring). `optimizer` is the torch optimizer it wraps."""

    def __init__(self, optimizer: Any, factor: float):
        self.optimizer = optimizer
        self.guard = BadStepGuard(factor)
        self._skip = False

    def judge(self, loss: float, grad_norm: float) -> bool:
        """Decide whether the coming `step()` is skipped, from the step's agreed loss and gradient norm."""
        self._skip = self.guard.should_skip(loss, grad_norm)
        return self._skip

    def step(self) -> None:
        if not self._skip:
            self.optimizer.step()

    @property
    def skipped(self) -> int:
        """Steps skipped so far in the run (resumes included)."""
        return self.guard.skipped
