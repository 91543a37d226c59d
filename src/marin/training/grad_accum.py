"""One optimizer step's gradient, accumulated over equal microbatches of this process's share of the batch."""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
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
) -> torch.Tensor:
    """Accumulate the gradient of the mean loss over `steps` equal microbatches (DDP and FSDP reduce
    gradients only on the last); returns that mean loss."""
    if inputs.shape[0] % steps:
        raise TrainingConfigError(
            f"grad_accum_steps={steps} does not split this process's {inputs.shape[0]} rows of the batch "
            f"(world size {world_size}); make batch_size a multiple of world size x grad_accum_steps"
        )
    total = torch.zeros((), device=inputs.device)
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
                logits = model(x)
                loss = F.cross_entropy(logits.flatten(0, 1).float(), y.flatten()) / steps
            loss.backward()
        total += loss.detach()
    return total
