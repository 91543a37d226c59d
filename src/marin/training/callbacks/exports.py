"""`Exports`: a Hugging Face export every `every` steps, so an evaluation can score each checkpoint."""

from __future__ import annotations

from dataclasses import dataclass

from marin.training.callbacks.base import Callback, StepOutput, TrainerView


@dataclass(eq=False)
class Exports(Callback):
    """Writes a Hugging Face export every `every` steps to `hf/step-NNNNNNNN/` (the last step's too, so
    a curve over the exports ends at the final model); None: none."""

    name = "exports"
    priority = 700
    every: int | None = None

    def on_step_end(self, trainer: TrainerView, step: StepOutput) -> None:
        if self.every and (step.step % self.every == 0 or (step.last and not trainer.interrupted)):
            trainer.export_hf(f"{trainer.output_path}/hf/{export_step_name(step.step)}")
            step.record["export"] = f"hf/{export_step_name(step.step)}"

    def on_train_end(self, trainer: TrainerView, summary: dict) -> None:
        if self.every:
            summary["exports"] = {
                str(s): f"hf/{export_step_name(s)}" for s in export_steps(self.every, trainer.step)
            }
            summary["tokens_per_step"] = trainer.rates.tokens_per_step


def export_step_name(step: int) -> str:
    """The folder of the export of step `step` under `hf/`: `step-00000010`."""
    return f"step-{step:08d}"


def export_steps(every: int, last: int) -> list[int]:
    """The steps a run that reached step `last` exported: every `every`-th, and the last."""
    return sorted({*range(every, last + 1, every), last}) if last > 0 else []
