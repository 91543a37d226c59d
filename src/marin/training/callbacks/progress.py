"""`ProgressBar`: a tqdm bar of steps and loss on rank 0."""

from __future__ import annotations

from typing import Any

from marin.training.callbacks.base import Callback, StepOutput, TrainerView


class ProgressBar(Callback):
    """A tqdm bar of steps and loss on rank 0."""

    name = "progress"
    priority = 1000

    def __init__(self) -> None:
        self._bar: Any = None

    def on_train_start(self, trainer: TrainerView) -> None:
        from tqdm import tqdm

        self._bar = tqdm(
            total=trainer.num_train_steps,
            initial=trainer.step,
            disable=not trainer.is_main,
            desc="train",
            mininterval=1.0,
            dynamic_ncols=True,
        )
        trainer.on_close(self._bar.close)

    def on_step_end(self, trainer: TrainerView, step: StepOutput) -> None:
        self._bar.update(1)
        self._bar.set_postfix(loss=f"{step.loss:.3f}", refresh=False)
