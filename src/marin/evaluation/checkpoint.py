"""Find and load the Hugging Face export of a train step, refusing missing or unfinished ones."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import storage
from marin.evaluation.errors import CheckpointNotReadyError
from marin.execution import artifact, status
from marin.execution.states import StepState

_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


@dataclass(frozen=True)
class HfExport:
    """Where a train step's export is, and its files as the step's `.artifact.json` manifest records them."""

    path: str
    manifest: (
        list[dict[str, Any]] | None
    )  # entries of the step's manifest, paths relative to the step's output
    manifest_prefix: str  # the export's folder within those paths, e.g. "hf/"


def find_hf_export(step_name: str, output_path: str) -> HfExport:
    """The Hugging Face export written by model step `step_name` at `output_path`.

    The step must have finished (its status is SUCCESS); the export is the `"hf_path"` of its
    `.artifact.json` result, else `{output_path}/hf`, and must hold `config.json` and weights. A never-run,
    running, failed or half-written step fails here with its name, not deep inside `from_pretrained`.
    """
    if not storage.exists(output_path):
        raise CheckpointNotReadyError(
            f"model step {step_name!r} has no output at {output_path}: run that step before evaluating it"
        )
    recorded = status.read_status(output_path)
    state = recorded.state if recorded is not None else None
    if state != StepState.SUCCESS:
        raise CheckpointNotReadyError(
            f"model step {step_name!r} is unfinished: its status at {output_path} is {state or 'missing'}, "
            f"not {StepState.SUCCESS}. Let the train step finish (or rerun it with `marin run`) and evaluate again"
        )
    hf_path = storage.join(output_path, "hf")
    record = artifact.read_artifact(output_path)
    result = record.result if record is not None else None
    if isinstance(result, dict) and isinstance(result.get("hf_path"), str):
        hf_path = (
            result["hf_path"]
            if "://" in result["hf_path"] or result["hf_path"].startswith("/")
            else storage.join(output_path, result["hf_path"])
        )
    if not storage.exists(storage.join(hf_path, "config.json")):
        raise CheckpointNotReadyError(
            f"model step {step_name!r} has no Hugging Face export: {hf_path}/config.json is missing. "
            "Evaluation needs the train step's hf/ export; rerun the train step with export enabled"
        )
    if not any(storage.exists(storage.join(hf_path, name)) for name in _WEIGHT_FILES):
        raise CheckpointNotReadyError(
            f"model step {step_name!r} has an incomplete export: {hf_path} has config.json but no weights "
            f"({' / '.join(_WEIGHT_FILES)}). Rerun the train step and evaluate again"
        )
    base = output_path.rstrip("/") + "/"
    prefix = hf_path[len(base) :].strip("/") + "/" if hf_path.startswith(base) else None
    files = record.files if record is not None and record.files and prefix is not None else None
    return HfExport(hf_path, files, prefix or "")


@dataclass(frozen=True)
class LoadedModel:
    """A causal LM in eval mode, its tokenizer, and the context length both the harness and we use."""

    model: Any
    tokenizer: Any
    max_length: int
    hf_path: str


def load_hf_model(hf_path: str, max_length: int | None = None) -> LoadedModel:
    """Load model and tokenizer from a local export in float32 on CPU (or the first CUDA device)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from marin.data.hf_models import HF_MODEL_BUILD_LOCK

    device = "cuda" if torch.cuda.is_available() else "cpu"
    with HF_MODEL_BUILD_LOCK:
        model = AutoModelForCausalLM.from_pretrained(hf_path, dtype=torch.float32)
    model = model.to(device)
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(hf_path)
    return LoadedModel(model, tokenizer, max_length or context_length(model.config, tokenizer), hf_path)


def context_length(config: Any, tokenizer: Any, default: int = 2048) -> int:
    """The model's context length, resolved in the same order as lm-eval-harness's `HFLM.max_length`."""
    cfg = getattr(config, "text_config", None) or config
    for attr in ("n_positions", "max_position_embeddings", "n_ctx"):
        value = getattr(cfg, attr, None)
        if value is not None:
            return int(value)
    model_max_length = getattr(tokenizer, "model_max_length", None)
    if model_max_length is not None and model_max_length < int(1e29):
        return int(model_max_length)
    return default
