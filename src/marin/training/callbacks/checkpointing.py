"""`Checkpointing`: when a checkpoint is written (by steps, by wall time, at the end, when stopping)."""

from __future__ import annotations

from dataclasses import dataclass, field

from marin.training.callbacks.base import Callback, StepOutput, TrainerView


@dataclass(eq=False)
class Checkpointing(Callback):
    """Writes a checkpoint every `every` optimizer steps (None: never by count), every `every_minutes`
    of wall time (None: never by time), at the last step, and when the run is stopping (a stop
    request or a signal).

    The wall-time clock is rank 0's (`StepOutput.clock`), so every rank decides alike; it restarts
    at each checkpoint and when the run (re)starts.
    """

    name = "checkpointing"
    priority = 900
    every: int | None = None
    every_minutes: float | None = 10.0
    _since: float = field(default=0.0, init=False, repr=False)

    def on_train_start(self, trainer: TrainerView) -> None:
        self._since = 0.0

    def on_step_end(self, trainer: TrainerView, step: StepOutput) -> None:
        due = (
            step.last
            or trainer.stopping
            or bool(self.every and step.step % self.every == 0)
            or (self.every_minutes is not None and step.clock - self._since >= self.every_minutes * 60.0)
        )
        if due:
            trainer.save_checkpoint()
            self._since = step.clock
