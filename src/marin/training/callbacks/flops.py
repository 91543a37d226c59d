"""A run's compute, counted two ways and kept apart: model FLOPs and hardware FLOPs.

- **Model FLOPs** are what the model's arithmetic needs: the config's `flops_per_token(seq_len)`
  (every matmul weight a token meets, attention's scores and values, a mixture-of-experts' active
  experts only) times the tokens trained. They depend on the model and the data, not the machine,
  and are what a scaling law's compute C is.
- **Hardware FLOPs** are what the hardware could have done while the run held it: wall seconds x
  devices x each device's peak FLOP/s (the peak `metrics.peak_flops_per_device` finds). The wall time is
  the training loop's, evaluations and checkpoints included, from the first step of each attempt to
  its end; an attempt that crashed counts up to its last checkpoint, whose state carries it.

Their ratio is the run's model FLOPs utilization over its whole wall time: lower than the per-step
`mfu` of `metrics.jsonl`, which leaves evaluation and checkpoint time out. `FlopsAccount` writes the
running totals into every step's record (`model_flops`, `hardware_flops`, `flops_ratio`) and the
totals into the train step's result under `flops`. It names no architecture: the counts come from
the model config and the devices.
"""

from __future__ import annotations

import time
from typing import Any

from marin.training.callbacks.base import Callback, StepOutput, TrainerView


class FlopsAccount(Callback):
    """Model FLOPs and hardware FLOPs of the run, step by step and in total (see the module docstring)."""

    name = "flops"
    priority = 200

    def __init__(self) -> None:
        self._carried = 0.0  # wall seconds of earlier attempts, up to their last checkpoint
        self._began = 0.0

    def on_train_start(self, trainer: TrainerView) -> None:
        self._began = time.perf_counter()

    def seconds(self) -> float:
        """Wall seconds of the run so far, earlier attempts included."""
        return self._carried + (time.perf_counter() - self._began)

    def on_step_end(self, trainer: TrainerView, step: StepOutput) -> None:
        model, hardware = self._totals(trainer, step.step, self.seconds())
        step.record["model_flops"] = model
        step.record["hardware_flops"] = hardware
        step.record["flops_ratio"] = model / hardware if hardware else None

    def on_train_end(self, trainer: TrainerView, summary: dict[str, Any]) -> None:
        seconds = self.seconds()
        model, hardware = self._totals(trainer, trainer.step, seconds)
        rates = trainer.rates
        summary["flops"] = {
            "model": model,
            "hardware": hardware,
            "ratio": model / hardware if hardware else None,
            "flops_per_token": rates.flops_per_token,
            "tokens": trainer.step * rates.tokens_per_step,
            "wall_seconds": seconds,
            "devices": rates.world_size,
            "peak_flops_per_device": rates.peak_flops / rates.world_size,
        }

    @staticmethod
    def _totals(trainer: TrainerView, steps: int, seconds: float) -> tuple[float, float]:
        rates = trainer.rates
        return steps * rates.tokens_per_step * rates.flops_per_token, seconds * rates.peak_flops

    def state_dict(self) -> dict[str, Any]:
        return {"wall_seconds": self.seconds()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._carried = float(state.get("wall_seconds", 0.0))
