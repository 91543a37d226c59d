"""`Evaluation`: the run's validation scores every `every` steps and at the last, into the step's record."""

from __future__ import annotations

from dataclasses import dataclass

from marin.training.callbacks.base import Callback, StepOutput, TrainerView


@dataclass(eq=False)
class Evaluation(Callback):
    """Adds `trainer.evaluate()` (the objective's validation scores) to the record every `every`
    optimizer steps (None: only at the end) and at the last step of a run not interrupted."""

    name = "evaluation"
    priority = 100
    every: int | None = None

    def on_step_end(self, trainer: TrainerView, step: StepOutput) -> None:
        if (self.every and step.step % self.every == 0) or (step.last and not trainer.interrupted):
            step.record.update(trainer.evaluate())
