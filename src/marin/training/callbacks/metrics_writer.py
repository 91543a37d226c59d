"""`MetricsWriter`: each step's record into `metrics.jsonl`, after every callback that adds to it."""

from __future__ import annotations

from marin.training.callbacks.base import Callback, StepOutput, TrainerView


class MetricsWriter(Callback):
    """Writes each step's record to `metrics.jsonl` (on rank 0)."""

    name = "metrics"
    priority = 800

    def on_step_end(self, trainer: TrainerView, step: StepOutput) -> None:
        if trainer.is_main:
            trainer.metrics.write(step.record)
