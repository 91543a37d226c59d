"""Callbacks: everything the training loop does besides the train step.

The loop body is one `Trainer.train_step()`; after it, each callback's `on_step_end` runs, in
order. Evaluation, the metrics record, checkpoints and the progress bar are callbacks, and so are
the user's (`train_lm(..., callbacks=(MyCallback(),))`). The contract:

- `on_train_start(trainer)`: once, after the model is built and a checkpoint (if any) loaded;
  `trainer.step` is the step the run starts from.
- `on_step_end(trainer, step)`: after every optimizer step, `step` a `StepOutput`. A callback may
  add fields to `step.record` (the step's line of `metrics.jsonl`, written after the user's
  callbacks), call `trainer.evaluate()`, or `trainer.request_stop(reason)`: the run then ends
  cleanly after this step, with a checkpoint, its export and its summary (`stopped` says why).
- `on_train_end(trainer, summary)`: once, after a run that finished or was stopped (not after an
  interrupt or an error); `summary` is the step's result and may be added to.
- `state_dict()` / `load_state_dict(state)`: what a callback must carry across a resume (an
  average of the weights, a counter) goes into every checkpoint and comes back on resume.

Callbacks run on every process of a run, in the same order (the loss and gradient norm they see
are already averaged over processes), so a decision made from them is the same everywhere.
`trainer` exposes `config`, `model_config`, `model` (the module being trained), `optimizer`,
`step`, `rank`, `world_size`, `is_main`, `output_path`, `rates` (the run's tokens per step,
FLOPs per token and devices' peak: `marin.training.step_metrics.StepMetrics`), `evaluate()`,
`request_stop(reason)`, `stopping`, and `save_checkpoint()`.

The order is: `Evaluation` (every `steps_per_eval` and at the end), `FlopsAccount` (model and
hardware FLOPs, `marin.training.flops`), the user's callbacks, `Exports` (every `export_every`),
`MetricsWriter`, `Checkpointing` (by step count, by wall time, at the end, when stopping),
`ProgressBar`. So a user callback sees the step's evaluation and FLOPs, what it adds is written, and
a stop it requests is checkpointed in the same step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from marin.training.trainer import Trainer


@dataclass
class StepOutput:
    """What one optimizer step produced.

    `step` counts the optimizer steps done (1 after the first). `loss` is the mean cross-entropy
    (nats per token) and `aux_losses` the model's auxiliary losses, both averaged over processes;
    `grad_norm` is before clipping. `seconds` is the step's wall time from the end of the previous
    step's callbacks (data wait included, evaluation and checkpoints not), `data_wait` the part
    spent waiting for the batch. `clock` is the run's wall seconds so far on rank 0, the same number
    on every rank. `last` is whether this is the run's final step (`num_train_steps` reached, or
    stopping). `skipped` is whether the update was skipped (`skip_bad_steps`: the loss was not
    finite or spiked). `record` is the step's `metrics.jsonl` line; callbacks may add to it.
    """

    step: int
    loss: float
    aux_losses: dict[str, float]
    lr: float
    grad_norm: float
    seconds: float
    data_wait: float
    clock: float
    last: bool
    skipped: bool = False
    record: dict[str, Any] = field(default_factory=dict)


class Callback:
    """A hook into the training loop; override the methods you need (each does nothing here)."""

    def on_train_start(self, trainer: Trainer) -> None:
        """Once, before the first step of this run (after a resume, `trainer.step` is where it resumed)."""

    def on_step_end(self, trainer: Trainer, step: StepOutput) -> None:
        """After every optimizer step."""

    def on_train_end(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        """Once, after the run finished or was stopped cleanly, with the run's summary."""

    def state_dict(self) -> dict[str, Any]:
        """What this callback must carry across a resume (JSON); saved in every checkpoint."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned, on resume."""


class Evaluation(Callback):
    """Validation loss and bits per byte every `steps_per_eval` steps and at the last step, into the record."""

    def on_step_end(self, trainer: Trainer, step: StepOutput) -> None:
        every = trainer.config.steps_per_eval
        if (every and step.step % every == 0) or (step.last and not trainer.interrupted):
            step.record.update(trainer.evaluate())


class MetricsWriter(Callback):
    """Writes each step's record to `metrics.jsonl` (on rank 0)."""

    def on_step_end(self, trainer: Trainer, step: StepOutput) -> None:
        if trainer.is_main:
            trainer.metrics.write(step.record)


class Checkpointing(Callback):
    """Writes a checkpoint every `checkpoint_every` steps, every `checkpoint_every_minutes` of wall
    time, at the last step, and when the run is stopping (a stop request or a signal).

    The wall-time clock is rank 0's (`StepOutput.clock`), so every rank decides alike; it restarts
    at each checkpoint and when the run (re)starts.
    """

    def __init__(self) -> None:
        self._since = 0.0

    def on_train_start(self, trainer: Trainer) -> None:
        self._since = 0.0

    def on_step_end(self, trainer: Trainer, step: StepOutput) -> None:
        config = trainer.config
        every, minutes = config.checkpoint_every, config.checkpoint_every_minutes
        due = (
            step.last
            or trainer.stopping
            or bool(every and step.step % every == 0)
            or (minutes is not None and step.clock - self._since >= minutes * 60.0)
        )
        if due:
            trainer.save_checkpoint()
            self._since = step.clock


class Exports(Callback):
    """Writes a Hugging Face export every `export_every` steps to `hf/step-NNNNNNNN/` (the last step's too,
    so a curve over the exports ends at the final model)."""

    def on_step_end(self, trainer: Trainer, step: StepOutput) -> None:
        every = trainer.config.export_every
        if every and (step.step % every == 0 or (step.last and not trainer.interrupted)):
            trainer.export_hf(f"{trainer.output_path}/hf/{export_step_name(step.step)}")
            step.record["export"] = f"hf/{export_step_name(step.step)}"


def export_step_name(step: int) -> str:
    """The folder of the export of step `step` under `hf/`: `step-00000010`."""
    return f"step-{step:08d}"


def export_steps(every: int, last: int) -> list[int]:
    """The steps a run that reached step `last` exported: every `every`-th, and the last."""
    return sorted({*range(every, last + 1, every), last}) if last > 0 else []


class ProgressBar(Callback):
    """A tqdm bar of steps and loss on rank 0."""

    def __init__(self) -> None:
        self._bar: Any = None

    def on_train_start(self, trainer: Trainer) -> None:
        from tqdm import tqdm

        self._bar = tqdm(
            total=trainer.config.num_train_steps,
            initial=trainer.step,
            disable=not trainer.is_main,
            desc="train",
            mininterval=1.0,
            dynamic_ncols=True,
        )
        trainer.on_close(self._bar.close)

    def on_step_end(self, trainer: Trainer, step: StepOutput) -> None:
        self._bar.update(1)
        self._bar.set_postfix(loss=f"{step.loss:.3f}", refresh=False)


class StopAfter(Callback):
    """Stops the run cleanly after `step` optimizer steps, or after `seconds` of wall time in this
    run: a checkpoint, the export and the summary are written as at a normal end."""

    def __init__(self, step: int | None = None, seconds: float | None = None):
        self.step, self.seconds = step, seconds

    def on_step_end(self, trainer: Trainer, step: StepOutput) -> None:
        if self.step is not None and step.step >= self.step:
            trainer.request_stop(f"StopAfter(step={self.step})")
        elif self.seconds is not None and step.clock >= self.seconds:
            trainer.request_stop(f"StopAfter(seconds={self.seconds})")


def default_callbacks(user: tuple[Callback, ...]) -> list[Callback]:
    """The loop's callbacks in order: evaluation, FLOPs, the user's, exports, metrics, checkpoints,
    progress.

    FlopsAccount comes before the user's callbacks so that its place, under which its state is
    checkpointed, does not depend on how many a run has."""
    from marin.training.flops import FlopsAccount  # a callback module of its own, which imports this one

    return [Evaluation(), FlopsAccount(), *user, Exports(), MetricsWriter(), Checkpointing(), ProgressBar()]
