"""What wraps each block of a model (`ModelConfig.blocks`): activation checkpointing and torch.compile.

Both wrap a block in place, so parameter names (and with them checkpoints and exports) never
change: checkpointing replaces the block's `forward` with one that runs it under
`torch.utils.checkpoint` (non-reentrant), and compile is `nn.Module.compile()`. The trainer applies
them in torchtitan's order, checkpointing, then compile, then FSDP's sharding, so FSDP gathers a
block's weights around the recomputation too.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts


class ActivationCheckpointing(StrEnum):
    """What each block keeps for the backward pass.

    NONE: every activation (fastest, most memory). FULL: only the block's input; the block's
    forward runs again during backward (about a third more compute, least memory). SELECTIVE: the
    outputs of the matrix multiplies and of attention are kept, the cheap elementwise work (norms,
    activations, RoPE) is recomputed (torch's selective activation checkpointing, per op).
    """

    NONE = "none"
    FULL = "full"
    SELECTIVE = "selective"


_SAVED_OPS = tuple(
    op
    for op in (
        getattr(torch.ops.aten, "mm", None),
        getattr(torch.ops.aten, "addmm", None),
        getattr(torch.ops.aten, "bmm", None),
        getattr(torch.ops.aten, "_scaled_dot_product_flash_attention", None),
        getattr(torch.ops.aten, "_scaled_dot_product_efficient_attention", None),
        getattr(torch.ops.aten, "_scaled_dot_product_cudnn_attention", None),
        getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None),
    )
    if op is not None
)
_SAVED = frozenset(getattr(op, "default", op) for op in _SAVED_OPS)


def _policy(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
    """Selective checkpointing: keep the outputs of matrix multiplies and attention, recompute the rest."""
    return CheckpointPolicy.MUST_SAVE if op in _SAVED else CheckpointPolicy.PREFER_RECOMPUTE


def _selective_contexts():
    return create_selective_checkpoint_contexts(_policy)


def _checkpointed(forward, mode: ActivationCheckpointing, *args: Any, **kwargs: Any) -> Any:
    if mode == ActivationCheckpointing.SELECTIVE:
        return checkpoint(forward, *args, use_reentrant=False, context_fn=_selective_contexts, **kwargs)
    return checkpoint(forward, *args, use_reentrant=False, **kwargs)


def checkpoint_blocks(blocks: Sequence[nn.Module], mode: ActivationCheckpointing | str) -> None:
    """Run each block under activation checkpointing `mode` ("none" leaves them as they are)."""
    mode = ActivationCheckpointing(mode)
    if mode == ActivationCheckpointing.NONE:
        return
    for block in blocks:
        if isinstance(block.forward, functools.partial):  # checkpointed already
            continue
        block.forward = functools.partial(_checkpointed, block.forward, mode)


def compile_wanted(setting: bool | str, device: torch.device) -> bool:
    """Whether `TrainConfig.compile` asks for torch.compile on `device` ("auto": on CUDA only)."""
    return device.type == "cuda" if setting == "auto" else bool(setting)


def compile_blocks(blocks: Sequence[nn.Module], **options: Any) -> None:
    """torch.compile each block in place (`nn.Module.compile`: its names stay); `options` go to torch.compile."""
    for block in blocks:
        block.compile(**options)
