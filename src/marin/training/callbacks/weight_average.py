"""`WeightAverage`: an exponential moving average of the weights, kept beside the model and exported
in its place (`train_lm(..., ema=0.999)`).

After every optimizer step that updates the weights, each averaged tensor moves toward its
parameter: `ema ← decay · ema + (1 − decay) · θ`, starting from the weights the run starts with
(after `init_from`). The averages are float32 (whatever the parameters' dtype), checkpointed by
parameter name (`ema.safetensors`), and a resumed run continues them exactly. A skipped step
(`skip_bad_steps`) leaves them as they are. With `export`, the export holds the averages instead of
the last weights; the summary says which (`exported_weights`), and every record whether an average
is kept (`ema`). Under FSDP the average would need each parameter whole, so TrainConfig refuses it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from marin.training.callbacks.base import Callback, StepOutput, TrainerView
from marin.training.errors import TrainingConfigError


class WeightEma:
    """The EMA of `model`'s parameters at `decay` (see the module docstring)."""

    def __init__(self, model: nn.Module, decay: float):
        self.decay = decay  # in (0, 1): TrainConfig checks it
        self._params = dict(model.named_parameters())
        with torch.no_grad():
            self.averages = {name: p.detach().float().clone() for name, p in self._params.items()}

    @torch.no_grad()
    def update(self) -> None:
        """Move every average toward its parameter's current value."""
        names = list(self.averages)
        averages = [self.averages[n] for n in names]
        params = [self._params[n].detach().float() for n in names]
        torch._foreach_mul_(averages, self.decay)
        torch._foreach_add_(averages, params, alpha=1.0 - self.decay)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The averages by parameter name."""
        return dict(self.averages)

    @torch.no_grad()
    def load_state_dict(self, tensors: dict[str, torch.Tensor]) -> None:
        """Continue from saved averages (every parameter's, by name)."""
        if set(tensors) != set(self.averages):
            raise TrainingConfigError(
                f"the checkpoint's EMA holds other parameters than the model: "
                f"{sorted(set(tensors) ^ set(self.averages))[:5]}"
            )
        for name, value in tensors.items():
            self.averages[name].copy_(value)

    @torch.no_grad()
    def copy_to(self, model: nn.Module) -> None:
        """Put the averages into `model`'s parameters (for export), each in its own dtype."""
        for name, param in model.named_parameters():
            param.copy_(self.averages[name].to(param.dtype))


@dataclass(eq=False)
class WeightAverage(Callback):
    """The moving average of the weights at `decay` (None: none kept), exported in place of the last
    weights when `export` (see the module docstring)."""

    name = "ema"
    priority = 10  # right after the update, before anything reads the step
    decay: float | None = None
    export: bool = True
    _ema: WeightEma | None = field(default=None, init=False, repr=False)
    _saved: dict[str, torch.Tensor] | None = field(default=None, init=False, repr=False)

    def on_train_start(self, trainer: TrainerView) -> None:
        if self.decay is None:
            return
        self._ema = WeightEma(trainer.model, self.decay)  # from the weights the run starts from
        if self._saved is not None:
            self._ema.load_state_dict(self._saved)
            self._saved = None

    def on_step_end(self, trainer: TrainerView, step: StepOutput) -> None:
        if self._ema is not None and not step.skipped:
            self._ema.update()
        step.record["ema"] = self._ema is not None

    def on_train_end(self, trainer: TrainerView, summary: dict[str, Any]) -> None:
        summary["exported_weights"] = "ema" if self._ema is not None and self.export else "last"

    def tensor_state(self) -> dict[str, torch.Tensor]:
        return self._ema.state_dict() if self._ema is not None else {}

    def load_tensor_state(self, tensors: dict[str, torch.Tensor]) -> None:
        self._saved = tensors

    def export_weights(self, model: nn.Module) -> nn.Module:
        if self._ema is None or not self.export:
            return model
        averaged = copy.deepcopy(model)
        self._ema.copy_to(averaged)
        return averaged
