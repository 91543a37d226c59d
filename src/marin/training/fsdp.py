"""FSDP2 helpers of the trainer: shard a model per block, read a replicated value, gather the whole model."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor

from marin.training.models import ModelConfig


def shard_model(model: nn.Module, blocks: Sequence[nn.Module], device: torch.device) -> None:
    """Apply FSDP2 to each block (`ModelConfig.blocks`), then to the root (embedding, final norm, output).

    On GPU, parameters are gathered and computed in bf16 with gradients reduced in fp32; on CPU
    everything stays fp32.
    """
    policy = (
        MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        if device.type == "cuda"
        else MixedPrecisionPolicy()
    )
    for block in blocks:
        fully_shard(block, mp_policy=policy)
    fully_shard(model, mp_policy=policy)


def local_tensor(value: torch.Tensor) -> torch.Tensor:
    """A plain tensor for `value`, which FSDP may return as a replicated DTensor."""
    return value.full_tensor() if isinstance(value, DTensor) else value


def gathered_model(model: nn.Module, config: ModelConfig, *, every_rank: bool = False) -> nn.Module:
    """On rank 0 (on every rank with `every_rank`), a plain CPU model of `config` holding an FSDP
    model's whole weights; elsewhere the model itself. Every rank must call it: the shards are
    gathered collectively."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    # cpu_offload gathers to rank 0 alone; without it every rank receives the whole tensors
    options = StateDictOptions(full_state_dict=True, cpu_offload=not every_rank)
    weights = get_model_state_dict(model, options=options)
    if not every_rank and dist.get_rank() != 0:
        return model
    whole = config.build()
    whole.load_state_dict({k: v.cpu() for k, v in weights.items()})
    return whole
