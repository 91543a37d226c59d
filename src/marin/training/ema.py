"""An exponential moving average of the weights, kept beside the model and exported in its place.

After every optimizer step that updates the weights, each averaged tensor moves toward its
parameter: `ema ← decay · ema + (1 − decay) · θ`, starting from the weights the run starts with.
The averages are float32 (whatever the parameters' dtype), checkpointed by parameter name, and a
resumed run continues them exactly. A skipped step (see `bad_steps`) leaves them as they are.
"""

from __future__ import annotations

import torch
from torch import nn

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
