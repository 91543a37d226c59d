"""`StopAfter`: end a run cleanly after a number of steps or seconds."""

from __future__ import annotations

from dataclasses import dataclass

from marin.training.callbacks.base import Callback, StepOutput, TrainerView


@dataclass(eq=False)
class StopAfter(Callback):
    """Stops the run cleanly after `step` optimizer steps, or after `seconds` of wall time in this
    run: a checkpoint, the export and the summary are written as at a normal end."""

    step: int | None = None
    seconds: float | None = None

    def on_step_end(self, trainer: TrainerView, step: StepOutput) -> None:
        if self.step is not None and step.step >= self.step:
            trainer.request_stop(f"StopAfter(step={self.step})")
        elif self.seconds is not None and step.clock >= self.seconds:
            trainer.request_stop(f"StopAfter(seconds={self.seconds})")
