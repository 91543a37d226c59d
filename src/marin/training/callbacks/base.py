"""The callback contract: what a callback is given (`TrainerView`, `StepOutput`) and may implement.

The loop body is one `Trainer.train_step()`; after it each callback's `on_step_end` runs, in order
of `priority` (lowest first; callbacks of equal priority in the order given). A callback:

- `on_train_start(trainer)`: once, after the model is built and a checkpoint (if any) loaded;
  `trainer.step` is the step the run starts from.
- `on_step_end(trainer, step)`: after every optimizer step, `step` a `StepOutput`. It may add fields
  to `step.record` (the step's line of `metrics.jsonl`, written after the user's callbacks), call
  `trainer.evaluate()`, or `trainer.request_stop(reason)`: the run then ends cleanly after this
  step, with a checkpoint, its export and its summary (`stopped` says why).
- `on_train_end(trainer, summary)`: once, after a run that finished or was stopped (not after an
  interrupt or an error); `summary` is the step's result and may be added to.
- `state_dict()` / `load_state_dict(state)` (JSON) and `tensor_state()` / `load_tensor_state(tensors)`
  (named tensors, a `{name}.safetensors` file): what it must carry across a resume. Both are saved
  under the callback's `name`, so adding or removing another callback never moves its state; a
  checkpoint holding the state of a callback the run no longer has is refused, naming it, unless
  the run's `drop_callback_state` names it.
- `export_weights(model)`: the weights an export writes (a weight average replaces them).

Callbacks run on every process of a run, in the same order, and see numbers already averaged over
processes, so a decision made from them is the same everywhere. They read and ask the trainer only
through `TrainerView`; nothing here imports the trainer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    import torch
    from torch import nn

    from marin.training.metrics import MetricsLog
    from marin.training.models import ModelConfig
    from marin.training.step_metrics import StepMetrics

USER_PRIORITY = 500  # where a callback that does not say goes: after evaluation and FLOPs, before exports


class TrainerView(Protocol):
    """What a callback may read and ask of the trainer, on every process.

    `step` counts the optimizer steps done; `model` is the module being trained (FSDP-sharded under
    FSDP, never the DDP wrapper); `optimizer` the torch optimizer; `rates` the run's tokens per
    step, FLOPs per token and devices' peak; `metrics` the run's `metrics.jsonl`;
    `tokenizer_path` and `eos_id` the tokenizer the run's data was made with. `interrupted` names
    the signal that is stopping the run (None: none), `stopping` whether the run ends after this
    step. `whole_model()` is the model with its whole weights on every process (collective under
    FSDP); `evaluate()`, `save_checkpoint()` and `export_hf(dir)` are collective: every process
    calls them. `on_close(fn)` calls `fn` when the loop ends, however it ends.
    """

    step: int
    num_train_steps: int
    rank: int
    world_size: int
    is_main: bool
    output_path: str
    model: nn.Module
    optimizer: Any
    model_config: ModelConfig
    metrics: MetricsLog
    rates: StepMetrics
    tokenizer_path: str | None
    eos_id: int | None
    interrupted: str | None

    @property
    def stopping(self) -> bool: ...

    def evaluate(self) -> dict[str, Any]: ...

    def save_checkpoint(self) -> str: ...

    def export_hf(self, out_dir: str) -> str: ...

    def request_stop(self, reason: str) -> None: ...

    def on_close(self, fn: Callable[[], None]) -> None: ...

    def whole_model(self) -> nn.Module: ...


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
    """A hook into the training loop; override the methods you need (each does nothing here).

    `name` keys the callback's saved state (default: its class name; set it on the class or the
    instance when a run has two of a kind). `priority` orders the callbacks (lower runs first;
    default `USER_PRIORITY`).
    """

    name: str = "Callback"
    priority: ClassVar[int] = USER_PRIORITY

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = cls.__name__

    def on_train_start(self, trainer: TrainerView) -> None:
        """Once, before the first step of this run (after a resume, `trainer.step` is where it resumed)."""

    def on_step_end(self, trainer: TrainerView, step: StepOutput) -> None:
        """After every optimizer step."""

    def on_train_end(self, trainer: TrainerView, summary: dict[str, Any]) -> None:
        """Once, after the run finished or was stopped cleanly, with the run's summary."""

    def state_dict(self) -> dict[str, Any]:
        """What this callback must carry across a resume (JSON); saved in every checkpoint."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned, on resume."""

    def tensor_state(self) -> dict[str, torch.Tensor]:
        """Named tensors this callback must carry across a resume (saved as `{name}.safetensors`)."""
        return {}

    def load_tensor_state(self, tensors: dict[str, torch.Tensor]) -> None:
        """Restore what `tensor_state` returned, on resume (before `on_train_start`)."""

    def export_weights(self, model: nn.Module) -> nn.Module:
        """The module whose weights an export of `model` (the weights being trained, whole) writes."""
        return model


def ordered(callbacks: list[Callback]) -> list[Callback]:
    """`callbacks` by priority (stable: equal priorities keep their order)."""
    return sorted(callbacks, key=lambda c: c.priority)
