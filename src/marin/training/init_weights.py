"""`train_lm(init_from=...)`: copy existing weights (and, asked, optimizer state) into a fresh run before step 0.

The source is a train step's output (its newest intact checkpoint), one checkpoint folder, or a
Hugging Face folder of the run's architecture. Weights are taken; the optimizer's moments and step
counts too with `init_optimizer=True` (a cooldown that continues the base run's optimizer); the data
order and RNG start fresh.
"""

from __future__ import annotations

from typing import Any

from safetensors.torch import load as load_safetensors
from torch import nn

import storage
from marin.execution.manifest import DIGEST, bytes_digest
from marin.training.checkpoint import (
    CHECKSUMS,
    DCP,
    DCP_METADATA,
    copy_weights,
    list_checkpoints,
    load_optimizer_state,
    load_sharded,
    read_verified,
    step_name,
)
from marin.training.errors import CheckpointError, CorruptCheckpointError
from marin.training.models import ModelConfig


def load_init_weights(
    source: str, model: nn.Module, config: ModelConfig, optimizer: Any = None
) -> dict[str, Any]:
    """Copy the weights at `source` into `model` (of `config`; train_lm's `init_from`) and say where they came from.

    `source` is a train step's output (its newest intact checkpoint is used), one checkpoint folder
    (verified against its checksums), or a Hugging Face folder (`config.json` and
    `model.safetensors`) of `config`'s architecture. Only weights are taken unless `optimizer` is
    given (`init_optimizer=True`): then the checkpoint's optimizer state (moments and step counts)
    is loaded into it too, and the source must be a checkpoint written by the same optimizer. The
    data order and RNG start fresh. Returns {"path", "kind", "xxh3_128"} of the weights file that
    was loaded, and "optimizer": True when its optimizer state was.
    """
    checkpoints = storage.join(source, "checkpoints")
    steps = list_checkpoints(checkpoints)
    if steps:
        for step in reversed(steps):
            folder = storage.join(checkpoints, step_name(step))
            try:
                return _load_checkpoint_weights(folder, model, optimizer)
            except CorruptCheckpointError as e:
                print(f"[marin.train] init_from: skipped checkpoint {folder}: {e}", flush=True)
        raise CheckpointError(f"init_from {source}: no checkpoint under {checkpoints} is intact")
    if storage.exists(storage.join(source, CHECKSUMS)):
        return _load_checkpoint_weights(source, model, optimizer)
    hf_weights = storage.join(source, "model.safetensors")
    if optimizer is not None and storage.exists(hf_weights):
        raise CheckpointError(
            f"init_from {source} is a Hugging Face folder, which holds no optimizer state; init_optimizer=True "
            "needs a train step or a checkpoint folder"
        )
    if storage.exists(storage.join(source, "config.json")) and storage.exists(hf_weights):
        data = storage.read_bytes(hf_weights)
        assert data is not None
        try:
            tensors = load_safetensors(data)
        except Exception as e:
            raise CheckpointError(f"init_from {hf_weights} cannot be read: {type(e).__name__}: {e}") from None
        copy_weights(config.hf.from_hf_state_dict(config, tensors), model, hf_weights)
        return {"path": hf_weights, "kind": "hf", DIGEST: bytes_digest(data)}
    raise CheckpointError(
        f"init_from {source}: not a train step's output (no checkpoints/), a checkpoint folder (no {CHECKSUMS}) "
        "or a Hugging Face model folder (config.json and model.safetensors); give one of those"
    )


def _load_checkpoint_weights(folder: str, model: nn.Module, optimizer: Any = None) -> dict[str, Any]:
    files = read_verified(folder)
    with_optimizer = {"optimizer": True} if optimizer is not None else {}
    if DCP_METADATA in files:
        load_sharded(folder, model, optimizer)
        return {
            "path": storage.join(folder, DCP),
            "kind": "checkpoint",
            DIGEST: bytes_digest(files[DCP_METADATA]),
            **with_optimizer,
        }
    data = files["model.safetensors"]
    try:
        weights = load_safetensors(data)
        moments = load_safetensors(files["optimizer.safetensors"]) if optimizer is not None else None
    except Exception as e:
        raise CorruptCheckpointError(f"checkpoint {folder} cannot be parsed: {e}") from None
    copy_weights(weights, model, f"{folder}/model.safetensors")
    if moments is not None:
        load_optimizer_state(optimizer, moments, model, f"init_from {folder}/optimizer.safetensors")
    return {
        "path": storage.join(folder, "model.safetensors"),
        "kind": "checkpoint",
        DIGEST: bytes_digest(data),
        **with_optimizer,
    }
