"""`load_model(path)`: a trained model, ready to score or generate, from wherever a run left it.

`path` is a train step's output (its newest intact checkpoint is loaded), one checkpoint folder
(`checkpoints/step-N`, verified against its checksums; whole or sharded), or a Hugging Face folder
(`config.json` and `model.safetensors`: our export, or any model of a registered architecture).
The architecture comes from the checkpoint's record of its model config, or from `config.json`'s
`model_type`, so nothing here names one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from torch import nn

import storage
from marin.training.checkpoint import CHECKSUMS, list_checkpoints, step_name
from marin.training.errors import CheckpointError
from marin.training.init_weights import load_init_weights
from marin.training.models import ModelConfig, config_from_hf, config_from_json

EXPORT_DIR = "hf"  # where a train step's output holds its Hugging Face export


def load_model(path: str, *, device: Any = "cpu") -> tuple[nn.Module, ModelConfig]:
    """`(model, config)` for the weights at `path`, in eval mode on `device`; `model(tokens)` gives logits."""
    config = model_config_at(path)
    model = config.build()
    load_init_weights(path, model, config)
    return model.to(device).eval(), config


def model_config_at(path: str) -> ModelConfig:
    """The model config of a train output, a checkpoint folder or a Hugging Face folder."""
    checkpoints = storage.join(path, "checkpoints")
    steps = list_checkpoints(checkpoints)
    if steps:
        return _checkpoint_config(storage.join(checkpoints, step_name(steps[-1])), fallback=path)
    if storage.exists(storage.join(path, CHECKSUMS)):
        return _checkpoint_config(path, fallback=None)
    raw = storage.read_bytes(storage.join(path, "config.json"))
    if raw is not None:
        return config_from_hf(json.loads(raw))
    raise CheckpointError(
        f"load_model {path}: not a train step's output (no checkpoints/), a checkpoint folder (no {CHECKSUMS}) "
        "or a Hugging Face model folder (no config.json); give one of those"
    )


def _checkpoint_config(folder: str, fallback: str | None) -> ModelConfig:
    """The model config a checkpoint's `state.json` records (else a train output's `hf/config.json`).

    Only `state.json` is read here; the weights are verified against the checksums when loaded."""
    raw = storage.read_bytes(storage.join(folder, "state.json"))
    try:
        recorded = json.loads(raw).get("extra", {}).get("model") if raw is not None else None
    except ValueError:
        recorded = None
    if recorded is not None:
        return config_from_json(recorded)
    hf = storage.read_bytes(storage.join(fallback, "hf", "config.json")) if fallback else None
    if hf is not None:
        return config_from_hf(json.loads(hf))
    raise CheckpointError(
        f"load_model {folder}: its state.json records no model config; load its train output's hf/ export instead"
    )


@dataclass(frozen=True)
class ExportedModel:
    """A Hugging Face folder holding a model's weights and tokenizer, and the model config to build."""

    hf_path: str
    model_config: ModelConfig


def exported_model(folder: str) -> ExportedModel:
    """The export and model config of a train step's output (its `hf/`) or of a Hugging Face folder.

    The model config is the one the train step's checkpoints record when there are any (exact: an
    output multiplier the export folded into `lm_head` is divided back out), else `config.json`'s; a
    folder that is a train output's `hf/` counts as that output."""
    if storage.exists(storage.join(folder, "config.json")):
        parent = storage.parent(folder.rstrip("/"))
        trained = storage.basename(folder.rstrip("/")) == EXPORT_DIR and list_checkpoints(
            storage.join(parent, "checkpoints")
        )
        return ExportedModel(folder, model_config_at(parent if trained else folder))
    if storage.exists(storage.join(folder, EXPORT_DIR, "config.json")):
        return ExportedModel(storage.join(folder, EXPORT_DIR), model_config_at(folder))
    raise CheckpointError(
        f"{folder}: no Hugging Face export there (no config.json, no {EXPORT_DIR}/config.json); give a train "
        "step, its output folder, or a Hugging Face model folder"
    )
