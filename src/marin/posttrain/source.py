"""Where a post-training run's starting weights come from, and what they are once it runs.

A source is one of:
- a step (a `train_lm()`, `sft()` or `dpo()` handle, or a StepSpec): a dependency, and at run time
  its output folder;
- a folder: a step's output (it has `hf/`) or a Hugging Face model folder (`config.json` and
  `model.safetensors`, local or on an object store);
- a hub id (`ORG/NAME`, or `ORG/NAME@REVISION`), downloaded into the Hugging Face cache when the step
  runs (from the cache alone when offline).

At run time `resolve()` gives the Hugging Face folder the weights and tokenizer are read from (a
step output's `hf/` export: what its evaluations score, and what LoRA adapters apply to) and the
model config: the one the step's checkpoints record when there are any (exact: an output multiplier
the export folded into `lm_head` is divided back out), else the folder's `config.json`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import storage
from marin.execution.errors import MarinError
from marin.training.loading import model_config_at
from marin.training.models import ModelConfig

EXPORT_DIR = "hf"


class ModelSourceError(MarinError):
    """A post-training source names no model we can load."""


@dataclass(frozen=True)
class WeightsSource:
    """One of `step` (a dependency's name), `path` (an absolute folder or URL) or `hub` (with `revision`)."""

    step: str | None = None
    path: str | None = None
    hub: str | None = None
    revision: str | None = None

    def describe(self) -> dict:
        """The key form: the step by name (its own key enters through the dependency), else where."""
        if self.step is not None:
            return {"step": self.step}
        if self.path is not None:
            return {"path": self.path}
        return {"hub": self.hub, "revision": self.revision}


@dataclass(frozen=True)
class ResolvedWeights:
    """The Hugging Face folder holding the weights and tokenizer, and the model config to build."""

    hf_path: str
    model_config: ModelConfig


def looks_like_hub_id(value: str) -> bool:
    """`ORG/NAME` (optionally `@REVISION`) that is not a path: no leading `/`, `.` or `~`, no scheme."""
    name = value.split("@", 1)[0]
    return (
        "://" not in value
        and not value.startswith(("/", ".", "~"))
        and name.count("/") == 1
        and all(name.split("/"))
        and not os.path.exists(value)
    )


def declared_inputs(source: WeightsSource) -> tuple[str, ...]:
    """The files a folder source's key covers: a step output's `hf/` export, else the folder's files."""
    if source.path is None:
        return ()
    if storage.is_local(source.path) and os.path.isfile(
        os.path.join(storage.local_path(source.path), "config.json")
    ):
        return (storage.join(source.path, "**"),)
    return (storage.join(source.path, EXPORT_DIR, "**"),)


def resolve(folder: str) -> ResolvedWeights:
    """The export and model config of a step output or Hugging Face folder (see the module docstring)."""
    if storage.exists(storage.join(folder, "config.json")):
        hf_path = folder
    elif storage.exists(storage.join(folder, EXPORT_DIR, "config.json")):
        hf_path = storage.join(folder, EXPORT_DIR)
    else:
        raise ModelSourceError(
            f"post-training source {folder}: no Hugging Face export there (no config.json, no "
            f"{EXPORT_DIR}/config.json); give a train step, its output folder, or a Hugging Face model folder"
        )
    return ResolvedWeights(hf_path, model_config_at(folder))


def download_hub_model(hub: str, revision: str | None) -> str:
    """The local folder of hub model `hub` at `revision` (the HF cache; a miss while offline is an error)."""
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(
            hub, revision=revision, allow_patterns=["*.json", "*.safetensors", "*.jinja", "*.txt"]
        )
    except Exception as e:  # offline and not cached, no such repo, no network
        raise ModelSourceError(
            f"post-training source {hub!r}{f' @ {revision}' if revision else ''} cannot be fetched from the Hugging "
            f"Face hub ({type(e).__name__}); run once with network access to fill the cache, or save the model "
            "to a folder and pass that folder"
        ) from None
