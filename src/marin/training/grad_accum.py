"""One optimizer step's gradient, accumulated over equal microbatches of this process's share of the batch."""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch import nn
from torch.distributed.fsdp import FSDPModule

from marin.training.errors import TrainingConfigError


def accumulate_gradients(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    steps: int,
    autocast: contextlib.AbstractContextManager,
    world_size: int = 1,
    forward_options: dict[str, Any] | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Accumulate the gradient of the mean objective over `steps` equal microbatches (DDP and FSDP
    reduce gradients only on the last). The objective is the model's loss plus its auxiliary
    losses (`model(inputs, targets, **forward_options) -> (loss, aux_losses)`; the options are the
    run's recipes: `document_eos`, `z_loss`); returns the mean loss and the mean of each auxiliary
    loss, detached."""
    options = forward_options or {}
    if inputs.shape[0] % steps:
        raise TrainingConfigError(
            f"grad_accum_steps={steps} does not split this process's {inputs.shape[0]} rows of the batch "
            f"(world size {world_size}); make batch_size a multiple of world size x grad_accum_steps"
        )
    total = torch.zeros((), device=inputs.device)
    aux_total: dict[str, torch.Tensor] = {}
    for i, (x, y) in enumerate(zip(inputs.chunk(steps), targets.chunk(steps), strict=False)):
        last = i == steps - 1
        sync = (
            model.no_sync()
            if not last and isinstance(model, nn.parallel.DistributedDataParallel)
            else contextlib.nullcontext()
        )
        if isinstance(model, FSDPModule):
            model.set_requires_gradient_sync(last)
        with sync:
            with autocast:
                loss, aux = model(x, y, **options)
                objective = loss
                for value in aux.values():
                    objective = objective + value
                objective = objective / steps
            objective.backward()
        total += loss.detach() / steps
        for name, value in aux.items():
            aux_total[name] = aux_total.get(name, 0.0) + value.detach().float() / steps
    return total, aux_total
