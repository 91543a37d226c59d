"""What supervised fine-tuning and DPO share as objectives: chat data, starting weights, LoRA, the export.

`ChatObjective` is a `marin.training.objective.Objective`; `SftObjective` (`sft.py`) and
`DpoObjective` (`dpo.py`) add their batches and their loss. The trainer, its loop, recipes
(schedules, optimizers, z-loss, EMA, skip_bad_steps, document masking), callbacks, checkpoints and
their exact resume, FSDP/DDP and the export are `train_lm`'s:

- the data are conversations or preference pairs (`marin.data.chat.ChatData`), rendered once when
  the run opens, by the chat template of the model's tokenizer (`chat_batches`, `pair_batches`);
- the starting weights (`weights`: a train step's output, a checkpoint, a Hugging Face folder) are
  loaded right after the model is built, on every attempt; then LoRA wraps its targets, and only
  the adapters train, are stepped by the optimizer and are checkpointed (`lora.Adapters`);
- the export is `hf/` with the tokenizer, its chat template and a `generation_config.json` that stops
  at the end of the assistant's turn; with LoRA `hf/` holds the merged weights and `adapter/` the
  adapters in PEFT's format, for the base model's export `base_hf_path`.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict
from enum import StrEnum
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

import storage
from marin.data.chat import ChatData
from marin.data.chat_template import generation_config, require_template
from marin.data.tokenizer import load_hf_tokenizer, materialize_tokenizer
from marin.posttrain.lora import Adapters, LoraConfig, apply_lora, merged_copy, save_peft_adapter
from marin.training.errors import TrainingConfigError, TrainingDataError
from marin.training.export import export_hf
from marin.training.init_weights import load_init_weights
from marin.training.loader import Batch
from marin.training.models import ModelConfig
from marin.training.objective import EvalBatch, Objective, RunContext

ADAPTER_DIR = "adapter"


class PostTraining(StrEnum):
    """Which post-training objective a step runs (its key holds it as `objective`)."""

    SFT = "sft"
    DPO = "dpo"


class InMemoryBatches:
    """Batches from a loader whose data is already in memory, made when asked (no reads to overlap)."""

    def __init__(self, loader: Any, device: torch.device):
        self.loader, self.device = loader, device
        self.wait_seconds = self.last_wait_seconds = 0.0

    def next(self) -> Batch:
        started = time.perf_counter()
        inputs, targets = self.loader.next_batch()
        batch = Batch(
            inputs=torch.from_numpy(inputs).to(self.device),
            targets=torch.from_numpy(targets).to(self.device),
            loader_state=self.loader.state_dict(),
            domain_epochs={"posttrain": float(self.loader.epoch)},
        )
        self.last_wait_seconds = time.perf_counter() - started
        self.wait_seconds += self.last_wait_seconds
        return batch

    def close(self) -> None:
        """Nothing runs in the background."""


class ChatObjective(Objective):
    """Post-training on chat data from starting weights, optionally through LoRA (see the module docstring).

    `weights`: the folder the starting weights are loaded from; `tokenizer_path` (default: `weights`)
    holds the tokenizer and its chat template; `base_hf_path` (default: `weights`) is the export
    LoRA adapters apply to.
    """

    kind: ClassVar[str] = "chat"

    def __init__(
        self,
        data: ChatData,
        validation: ChatData | None = None,
        *,
        weights: str,
        tokenizer_path: str | None = None,
        base_hf_path: str | None = None,
        lora: LoraConfig | None = None,
    ):
        self.data, self.validation, self.weights, self.lora = data, validation, weights, lora
        self.tokenizer_source = tokenizer_path or weights
        self.base_hf_path = base_hf_path or weights
        self.data_summary: dict[str, Any] = {}

    def open(self, run: RunContext) -> ModelConfig:
        self.run = run
        self.tokenizer_path = _local_tokenizer(self.tokenizer_source)
        self.tokenizer = load_hf_tokenizer(self.tokenizer_path)
        require_template(self.tokenizer, self.tokenizer_source)
        if self.tokenizer.eos_token_id is None:
            raise TrainingDataError(
                f"the tokenizer at {self.tokenizer_source} has no EOS token; post-training ends each sequence with it"
            )
        self.eos_id = int(self.tokenizer.eos_token_id)
        self.model_config = run.config.model
        if len(self.tokenizer) > self.model_config.vocab_size:
            raise TrainingDataError(
                f"the tokenizer at {self.tokenizer_source} has {len(self.tokenizer)} tokens, more than the model's "
                f"{self.model_config.vocab_size} embedding rows; post-train the model with its own tokenizer"
            )
        self.render()
        return self.model_config

    def render(self) -> None:
        """Render the training and validation data with the tokenizer (set `data_summary`)."""
        raise NotImplementedError(f"{type(self).__name__} must define render()")

    def fingerprint_fields(self) -> dict[str, Any]:
        return {
            "objective": str(self.kind),
            "data": self.data.describe(),
            "validation": self.validation.describe() if self.validation else None,
            "lora": asdict(self.lora) if self.lora else None,
        }

    def prepare_model(self, model: nn.Module) -> nn.Module:
        """Load the starting weights (every attempt: a LoRA checkpoint holds only the adapters), then
        wrap the LoRA targets; the adapters, or the whole model, are what trains."""
        self.model = model
        self.starting_weights = load_init_weights(self.weights, model, self.model_config)
        if self.lora is None:
            return model
        if self.run.config.parallelism == "fsdp":
            raise TrainingConfigError(
                "LoRA with parallelism='fsdp' is not supported: its adapters are small, so use ddp"
            )
        self.lora_modules = apply_lora(model, self.lora)
        return Adapters(model)

    def batch_stream(self, loader: Any, prefetch: int) -> InMemoryBatches:
        return InMemoryBatches(loader, self.run.device)

    def eval_units(self, units: list[tuple[np.ndarray, np.ndarray]], lockstep: bool) -> Iterator[EvalBatch]:
        """This rank's share of the validation `units` ((inputs, targets) rows of a window, or of a
        pair), in batches; with `lockstep` every rank runs as many, a rank out of units a filler."""
        world = self.run.world_size
        mine = units[self.run.rank :: world]
        count = -(-len(units) // world) if lockstep else len(mine)
        per_batch = max(1, self.run.config.batch_size // world)
        for i in range(0, count, per_batch):
            part = mine[i : i + per_batch]
            scored = bool(part)
            rows = part or units[:1]
            yield EvalBatch(
                torch.from_numpy(np.concatenate([x for x, _ in rows])).to(self.run.device),
                torch.from_numpy(np.concatenate([y for _, y in rows])).to(self.run.device),
                scored=scored,
            )

    def export(self, model: nn.Module, model_config: ModelConfig, out_dir: str) -> None:
        extra = {"generation_config.json": json.dumps(generation_config(self.tokenizer), indent=2).encode()}
        weights = merged_copy(model) if self.lora is not None else model
        export_hf(
            weights,
            model_config,
            out_dir,
            tokenizer_dir=self.tokenizer_path,
            eos_id=self.eos_id,
            bos_id=self.tokenizer.bos_token_id,
            extra_files=extra,
        )

    def summarize(self, summary: dict[str, Any]) -> None:
        summary["objective"] = str(self.kind)
        summary.update(self.data_summary)
        if self.lora is not None:
            # LoRA runs are never sharded and keep no moving average, so `self.model` holds the
            # exported weights whole.
            adapter = storage.join(self.run.output_path, ADAPTER_DIR)
            save_peft_adapter(self.model, self.model_config, self.lora, adapter, base_model=self.base_hf_path)
            summary["adapter_path"] = adapter
            summary["lora_modules"] = len(self.lora_modules)
            summary["trainable_parameters"] = sum(p.numel() for p in Adapters(self.model).parameters())


def _local_tokenizer(path: str) -> str:
    """A local folder holding the tokenizer at `path` (copied from an object store when it is there)."""
    if storage.is_local(path):
        return storage.local_path(path)
    local = tempfile.mkdtemp(prefix="marin-posttrain-tokenizer-")
    materialize_tokenizer(path, local)
    return local
