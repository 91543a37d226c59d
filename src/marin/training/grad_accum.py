"""One optimizer step's gradient, accumulated over equal microbatches of this process's share of the batch."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.distributed.fsdp import FSDPModule

from marin.training.errors import TrainingConfigError
from marin.training.objective import ObjectiveLoss

LossFn = Callable[[nn.Module, torch.Tensor, torch.Tensor, dict[str, Any]], ObjectiveLoss]
"""`loss(model, inputs, targets, forward_options)` on one microbatch: an objective's `loss`."""


def accumulate_gradients(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    steps: int,
    autocast: contextlib.AbstractContextManager,
    world_size: int,
    forward_options: dict[str, Any],
    loss: LossFn,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Accumulate the gradient of the mean objective over `steps` equal microbatches (DDP and FSDP
    reduce gradients only on the last). `loss` is the run's objective (`Objective.loss`), given the
    run's forward options (`document_eos`, `z_loss`). Returns the mean loss and the mean of each
    logged figure (the auxiliary losses), detached."""
    if inputs.shape[0] % steps:
        raise TrainingConfigError(
            f"grad_accum_steps={steps} does not split this process's {inputs.shape[0]} rows of the batch "
            f"(world size {world_size}); make batch_size a multiple of world size x grad_accum_steps"
        )
    total = torch.zeros((), device=inputs.device)
    logged_total: dict[str, torch.Tensor] = {}
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
                out = loss(model, x, y, forward_options)
                minimised = out.minimised / steps
            minimised.backward()
        total += out.loss.detach() / steps
        for name, value in out.logged.items():
            logged_total[name] = logged_total.get(name, 0.0) + value.detach().float() / steps
    return total, logged_total
