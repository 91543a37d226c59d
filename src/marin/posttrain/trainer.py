"""The trainer with other losses: supervised fine-tuning and DPO, optionally through LoRA adapters.

`PostTrainJob` is a `TrainJob` whose `make_trainer` returns `SftTrainer` or `DpoTrainer`; both are
the pretraining `Trainer` with the parts that depend on data and objective replaced, so the loop,
the recipes (schedules, optimizers, z-loss, EMA, skip_bad_steps, document masking), callbacks,
checkpoints and their exact resume, FSDP/DDP and the export are the same code:

- the data are conversations or preference pairs (`marin.data.chat.ChatData`), rendered once at the
  start by the chat template of the model's tokenizer (`chat_batches`, `pair_batches`);
- the starting weights (`job.weights`: a train step's output, a checkpoint, a Hugging Face folder)
  are loaded right after the model is built, on every attempt; then LoRA wraps its targets, and only
  the adapters train, are stepped by the optimizer and are checkpointed (`lora.Adapters`);
- SFT's objective is the model's own loss, which skips the IGNORE_INDEX targets of every token that
  is not the assistant's; DPO's is `dpo.dpo_loss` against a frozen reference: `job.reference`'s
  weights, else the starting weights (with LoRA: the model with its adapters off, no copy);
- evaluation scores the held-out conversations (reply-token loss) or pairs (DPO loss, reward
  accuracy and margin);
- the export is `hf/` with the tokenizer, its chat template and a `generation_config.json` that stops
  at the end of the assistant's turn; with LoRA `hf/` holds the merged weights and `adapter/` the
  adapters in PEFT's format, for the base model's export `job.base_hf_path`.
"""

from __future__ import annotations

import copy
import hashlib
import json
import tempfile
import time
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import storage
from marin.data.chat import ChatData
from marin.data.chat_template import generation_config, require_template
from marin.data.file_documents import ShardStats
from marin.data.tokenizer import load_hf_tokenizer, materialize_tokenizer
from marin.posttrain.chat_batches import PackedChats, render_conversations
from marin.posttrain.dpo import dpo_loss, sequence_logprobs
from marin.posttrain.lora import (
    Adapters,
    LoraConfig,
    adapters_disabled,
    apply_lora,
    merged_copy,
    save_peft_adapter,
)
from marin.posttrain.pair_batches import PairBatches, render_pairs
from marin.training.errors import TrainingConfigError, TrainingDataError
from marin.training.export import export_hf
from marin.training.init_weights import load_init_weights
from marin.training.loader import Batch
from marin.training.models.layers import IGNORE_INDEX
from marin.training.trainer import Trainer, TrainJob

ADAPTER_DIR = "adapter"


class Objective(StrEnum):
    """What a post-training run minimises."""

    SFT = "sft"
    DPO = "dpo"


@dataclass(frozen=True)
class PostTrainJob(TrainJob):
    """A post-training run: a TrainJob (its config's model is the starting weights' architecture) plus
    the chat data, where the weights and tokenizer are, LoRA, and DPO's parameters."""

    objective: Objective = Objective.SFT
    data: ChatData | None = None
    validation: ChatData | None = None
    weights: str = ""  # the starting weights: a train step's output, a checkpoint folder or an HF folder
    tokenizer_path: str = ""  # a folder with the tokenizer (and its chat template)
    base_hf_path: str | None = None  # the HF export of the starting weights: LoRA adapters apply to it
    lora: LoraConfig | None = None
    beta: float = 0.1
    label_smoothing: float = 0.0
    reference: str | None = None  # DPO's reference weights (None: the starting weights)

    def make_trainer(self, env: Any, device: torch.device, signals: Any) -> Trainer:
        cls = SftTrainer if self.objective == Objective.SFT else DpoTrainer
        return cls(self, env, device, signals)

    def describe(self) -> dict:
        """What the run computes besides its TrainConfig: the fingerprint its checkpoints carry."""
        return {
            "objective": str(self.objective),
            "data": self.data.describe() if self.data else None,
            "validation": self.validation.describe() if self.validation else None,
            "lora": asdict(self.lora) if self.lora else None,
            "beta": self.beta,
            "label_smoothing": self.label_smoothing,
            "reference": self.reference is not None,
        }


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


class PostTrainer(Trainer):
    """What SFT and DPO share: the tokenizer, the starting weights, LoRA, the in-memory batches, the export."""

    job: PostTrainJob

    def _open_data(self) -> None:
        job = self.job
        self.datasets = []
        self._tokenizer_dir = _local_tokenizer(job.tokenizer_path)
        self.tokenizer = load_hf_tokenizer(self._tokenizer_dir)
        require_template(self.tokenizer, job.tokenizer_path)
        if self.tokenizer.eos_token_id is None:
            raise TrainingDataError(
                f"the tokenizer at {job.tokenizer_path} has no EOS token; post-training ends each sequence with it"
            )
        self.eos_id = int(self.tokenizer.eos_token_id)
        self.model_config = self.config.model
        if len(self.tokenizer) > self.model_config.vocab_size:
            raise TrainingDataError(
                f"the tokenizer at {job.tokenizer_path} has {len(self.tokenizer)} tokens, more than the model's "
                f"{self.model_config.vocab_size} embedding rows; post-train the model with its own tokenizer"
            )
        fields = {"train": self.config.result_json(), **job.describe()}
        self.fingerprint = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]
        self.data_summary: dict[str, Any] = {}

    def _prepare_model(self) -> nn.Module:
        """Load the starting weights (every attempt: a LoRA checkpoint holds only the adapters), then
        wrap the LoRA targets; the adapters, or the whole model, are what trains."""
        self.init_record = load_init_weights(self.job.weights, self.model, self.model_config)
        if self.job.lora is None:
            return self.model
        if self.fsdp:
            raise TrainingConfigError(
                "LoRA with parallelism='fsdp' is not supported: its adapters are small, so use ddp"
            )
        self.lora_modules = apply_lora(self.model, self.job.lora)
        return Adapters(self.model)

    def _forward_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if self.config.document_masking:
            options["document_eos"] = self.eos_id
        if self.config.z_loss:
            options["z_loss"] = float(self.config.z_loss)
        return options

    def _batches(self) -> InMemoryBatches:
        return InMemoryBatches(self.loader, self.device)

    def _export(self, model: nn.Module, out_dir: str) -> None:
        extra = {"generation_config.json": json.dumps(generation_config(self.tokenizer), indent=2).encode()}
        weights = merged_copy(model) if self.job.lora is not None else model
        export_hf(
            weights,
            self.model_config,
            out_dir,
            tokenizer_dir=self._tokenizer_dir,
            eos_id=self.eos_id,
            bos_id=self.tokenizer.bos_token_id,
            extra_files=extra,
        )

    def _summarize(self, summary: dict[str, Any]) -> None:
        summary["objective"] = str(self.job.objective)
        summary.update(self.data_summary)
        if self.job.lora is not None:
            # LoRA runs are never sharded and keep no moving average, so `self.model` holds the
            # exported weights whole.
            adapter = storage.join(self.output_path, ADAPTER_DIR)
            save_peft_adapter(
                self.model, self.model_config, self.job.lora, adapter, base_model=self.job.base_hf_path
            )
            summary["adapter_path"] = adapter
            summary["lora_modules"] = len(self.lora_modules)
            summary["trainable_parameters"] = sum(p.numel() for p in self.trainable.parameters())

    def _lockstep_rows(self, rows: list[Any], empty: Any) -> list[Any]:
        """This rank's share of `rows`, padded with `empty` so every rank runs as many forwards (FSDP)."""
        world = self.world_size
        padded = rows + [empty] * (-len(rows) % world)
        return padded[self.rank :: world]


class SftTrainer(PostTrainer):
    """Supervised fine-tuning: conversations packed into windows, the loss on the assistant's tokens."""

    def _make_loader(self) -> PackedChats:
        stats = ShardStats()
        width = self.config.seq_len + 1
        data = render_conversations(self.tokenizer, self.job.data.conversations(stats), self.eos_id, width)
        if data.count == 0:
            raise TrainingDataError(
                f"the chat data ({self.job.data.describe()}) holds no conversation to train on"
                + (f" ({stats.bad_records} malformed records skipped)" if stats.bad_records else "")
            )
        self.data_summary = {
            "conversations": data.count,
            "tokens": data.num_tokens,
            "target_tokens": data.num_target_tokens,
            "truncated": data.truncated,
            "dropped": data.dropped,
            "bad_records": stats.bad_records,
        }
        return PackedChats(
            data,
            seq_len=self.config.seq_len,
            batch_size=self.config.batch_size,
            seed=self.config.seed,
            eos_id=self.eos_id,
            rank=self.rank,
            world_size=self.world_size,
        )

    def _validation_windows(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The held-out conversations packed in order once, as (inputs, targets) rows (cached)."""
        cached = getattr(self, "_validation", None)
        if cached is not None:
            return cached
        windows: list[tuple[torch.Tensor, torch.Tensor]] = []
        if self.job.validation is not None:
            data = render_conversations(
                self.tokenizer,
                self.job.validation.conversations(ShardStats()),
                self.eos_id,
                self.config.seq_len + 1,
            )
            if data.count:
                loader = PackedChats(
                    data, seq_len=self.config.seq_len, batch_size=1, seed=0, eos_id=self.eos_id, shuffle=False
                )
                while loader.epoch == 0:
                    inputs, targets = loader.next_batch()
                    windows.append((torch.from_numpy(inputs), torch.from_numpy(targets)))
        self._validation = windows
        return windows

    def evaluate(self) -> dict:
        """`eval_loss`: nats per reply token of the held-out conversations (summed over ranks)."""
        windows = self._validation_windows()
        if not windows:
            return {}
        empty = (windows[0][0], torch.full_like(windows[0][1], IGNORE_INDEX))
        nll, count = 0.0, 0
        was_training = self.model.training
        self.model.eval()
        with torch.no_grad(), self.autocast:
            for inputs, targets in self._lockstep_rows(windows, empty):
                x, y = inputs.to(self.device), targets.to(self.device)
                logits = self.model(x, **{k: v for k, v in self.forward_options.items() if k != "z_loss"})
                nll += F.cross_entropy(
                    logits.flatten(0, 1).float(), y.flatten(), ignore_index=IGNORE_INDEX, reduction="sum"
                ).item()
                count += int((y != IGNORE_INDEX).sum())
        self.model.train(was_training)
        nll, count = self._all_sum([nll, float(count)])
        return {"eval_loss": nll / count, "eval_tokens": int(count)} if count else {}


class DpoTrainer(PostTrainer):
    """DPO: pairs of answers, the policy pushed towards the chosen one relative to a frozen reference."""

    def _prepare_model(self) -> nn.Module:
        trainable = super()._prepare_model()
        self.reference: nn.Module | None = None
        if self.job.reference is not None:
            self.reference = self.model_config.build().to(self.device)
            load_init_weights(self.job.reference, self.reference, self.model_config)
        elif self.job.lora is None:
            self.reference = copy.deepcopy(self.model)  # the starting weights, before any step
        if self.reference is not None:
            self.reference.eval().requires_grad_(False)
        return trainable

    def _make_loader(self) -> PairBatches:
        stats = ShardStats()
        pairs = render_pairs(self.tokenizer, self.job.data.pairs(stats), self.eos_id, self.config.seq_len + 1)
        if pairs.count == 0:
            raise TrainingDataError(
                f"the preference data ({self.job.data.describe()}) holds no pair that fits seq_len="
                f"{self.config.seq_len} ({pairs.skipped} too long)"
            )
        self.data_summary = {
            "pairs": pairs.count,
            "too_long": pairs.skipped,
            "bad_records": stats.bad_records,
        }
        return PairBatches(
            pairs,
            batch_size=self.config.batch_size,
            seed=self.config.seed,
            rank=self.rank,
            world_size=self.world_size,
        )

    def _logits_options(self) -> dict[str, Any]:
        return {k: v for k, v in self.forward_options.items() if k != "z_loss"}

    def _reference_logprobs(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            if self.reference is None:
                with adapters_disabled(self.model):
                    logits = self.model(inputs, **self._logits_options())
            else:
                logits = self.reference(inputs, **self._logits_options())
            return sequence_logprobs(logits, targets)

    def _objective(
        self, model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, options: dict[str, Any]
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """DPO on one microbatch of interleaved (chosen, rejected) rows; logs TRL's figures."""
        policy = sequence_logprobs(model(inputs, **self._logits_options()), targets)
        reference = self._reference_logprobs(inputs, targets)
        out = dpo_loss(
            policy[0::2],
            policy[1::2],
            reference[0::2],
            reference[1::2],
            self.job.beta,
            self.job.label_smoothing,
        )
        logged = {name: torch.tensor(value) for name, value in out.metrics().items()}
        logged["logps/chosen"] = policy[0::2].detach().mean()
        logged["logps/rejected"] = policy[1::2].detach().mean()
        return out.loss, out.loss, logged

    def _validation_pairs(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        cached = getattr(self, "_validation", None)
        if cached is not None:
            return cached
        rows: list[tuple[torch.Tensor, torch.Tensor]] = []
        if self.job.validation is not None:
            pairs = render_pairs(
                self.tokenizer, self.job.validation.pairs(ShardStats()), self.eos_id, self.config.seq_len + 1
            )
            if pairs.count:
                loader = PairBatches(pairs, batch_size=1, seed=0, shuffle=False)
                while loader.epoch == 0:
                    inputs, targets = loader.next_batch()
                    rows.append((torch.from_numpy(inputs), torch.from_numpy(targets)))
        self._validation = rows
        return rows

    def evaluate(self) -> dict:
        """On the held-out pairs: `eval_loss` (DPO's), `eval_rewards/accuracies` and `eval_rewards/margins`."""
        pairs = self._validation_pairs()
        if not pairs:
            return {}
        empty = (pairs[0][0], torch.full_like(pairs[0][1], IGNORE_INDEX))
        sums = [0.0, 0.0, 0.0, 0.0]  # loss, accuracy, margin, pairs
        was_training = self.model.training
        self.model.eval()
        with torch.no_grad(), self.autocast:
            for inputs, targets in self._lockstep_rows(pairs, empty):
                x, y = inputs.to(self.device), targets.to(self.device)
                policy = sequence_logprobs(self.model(x, **self._logits_options()), y)
                if bool((y != IGNORE_INDEX).any()):
                    reference = self._reference_logprobs(x, y)
                    out = dpo_loss(
                        policy[0::2], policy[1::2], reference[0::2], reference[1::2], self.job.beta
                    )
                    sums[0] += out.loss.item()
                    sums[1] += float((out.margins > 0).float().mean())
                    sums[2] += float(out.margins.mean())
                    sums[3] += 1.0
        self.model.train(was_training)
        loss, accuracy, margin, n = self._all_sum(sums)
        if not n:
            return {}
        return {
            "eval_loss": loss / n,
            "eval_rewards/accuracies": accuracy / n,
            "eval_rewards/margins": margin / n,
            "eval_pairs": int(n),
        }


def _local_tokenizer(path: str) -> str:
    """A local folder holding the tokenizer at `path` (copied from an object store when it is there)."""
    if storage.is_local(path):
        return storage.local_path(path)
    local = tempfile.mkdtemp(prefix="marin-posttrain-tokenizer-")
    materialize_tokenizer(path, local)
    return local
