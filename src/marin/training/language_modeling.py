"""`LanguageModeling`: the objective of `train_lm`, next-token prediction on a mixture of token caches.

Its data are the `tokenized()` caches a run names (`DatasetInput`s, their weights or a
`MixtureSchedule`): windows of `seq_len + 1` tokens drawn by `loader.WindowMixture` and read ahead
by `loader.Prefetcher`. Its loss is the model's own (`model(inputs, targets)`: the mean
cross-entropy, computed once in the model) plus the model's auxiliary losses, which are logged too.
It scores each dataset's `validation` split window by window with that same loss (`eval_loss`, nats
per token, and `eval_bpb`, bits per byte), exports with the caches' tokenizer, and reports the
unigram entropy of the training tokens.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from marin.training.datasets import DatasetInput, OpenedDataset, check_vocab, open_dataset, unigram_entropy
from marin.training.errors import TrainingConfigError
from marin.training.export import export_hf
from marin.training.loader import NamedSource, Prefetcher, WindowMixture
from marin.training.mixture import MixtureSchedule
from marin.training.models import ModelConfig
from marin.training.models.layers import IGNORE_INDEX
from marin.training.objective import EvalBatch, Objective, ObjectiveLoss, RunContext
from marin.training.validation import validation_batches


class LanguageModeling(Objective):
    """Next-token prediction on `datasets` (token caches), mixed by their weights or by `mixture`."""

    kind = "lm"
    score_names = ("loss", "bpb")

    def __init__(self, datasets: tuple[DatasetInput, ...], mixture: MixtureSchedule | None = None):
        self.datasets, self.mixture = tuple(datasets), mixture
        self.opened: list[OpenedDataset] = []

    def open(self, run: RunContext) -> ModelConfig:
        self.run = run
        self.opened = [open_dataset(d) for d in self.datasets]
        first = self.opened[0]
        self.tokenizer_path, self.eos_id = first.tokenizer_path, first.eos_id
        if run.config.document_masking:
            eos = {d.eos_id for d in self.opened}
            if len(eos) != 1 or None in eos:
                raise TrainingConfigError(
                    "document_masking splits windows at the EOS token, but the datasets' tokenizers end "
                    f"documents with {sorted(map(str, eos))}; train on caches of one tokenizer"
                )
        return resolve_model_config(run.config.model, self.opened)

    def fingerprint_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {"datasets": [[d.name, d.weight] for d in self.datasets]}
        if self.mixture is not None:
            fields["mixture"] = self.mixture.describe()
        return fields

    def train_loader(self) -> WindowMixture:
        config, run = self.run.config, self.run
        return WindowMixture(
            [NamedSource(d.input.name, d.train, d.input.weight) for d in self.opened],
            seq_len=config.seq_len,
            batch_size=config.batch_size,
            seed=config.seed,
            rank=run.rank,
            world_size=run.world_size,
            schedule=self.mixture,
        )

    def batch_stream(self, loader: WindowMixture, prefetch: int) -> Prefetcher:
        return Prefetcher(loader, self.run.device, depth=prefetch)

    def loss(
        self, model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, options: dict[str, Any]
    ) -> ObjectiveLoss:
        return model_loss(model, inputs, targets, options)

    def eval_batches(self, lockstep: bool) -> Iterator[EvalBatch]:
        config, run = self.run.config, self.run
        return validation_batches(
            self.opened,
            seq_len=config.seq_len,
            max_tokens=config.eval_max_tokens,
            batch_size=config.batch_size,
            device=run.device,
            rank=run.rank,
            world_size=run.world_size,
            lockstep=lockstep,
        )

    def scores(
        self, model: nn.Module, batch: EvalBatch, options: dict[str, Any]
    ) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """Per window: its nats and target tokens (`loss`), and its bits and estimated bytes (`bpb`)."""
        nats, tokens = row_nats(model, batch, options)
        bytes_per_token = (batch.info or {}).get("bytes_per_token", math.nan)
        return {"loss": (nats, tokens), "bpb": (nats / math.log(2), tokens * bytes_per_token)}

    def export(self, model: nn.Module, model_config: ModelConfig, out_dir: str) -> None:
        export_hf(model, model_config, out_dir, tokenizer_dir=self.tokenizer_path, eos_id=self.eos_id)

    def summarize(self, summary: dict[str, Any]) -> None:
        summary["train_unigram_entropy"] = unigram_entropy(
            [d.train for d in self.opened], summary["vocab_size"]
        )


def model_loss(
    model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, options: dict[str, Any]
) -> ObjectiveLoss:
    """The model's own loss (`model(inputs, targets)`, targets of -100 not scored) plus its auxiliary
    losses, which are logged too: language modelling's objective, and supervised fine-tuning's."""
    loss, aux = model(inputs, targets, **options)
    minimised = loss
    for value in aux.values():
        minimised = minimised + value
    return ObjectiveLoss(minimised, loss, aux)


def row_nats(
    model: nn.Module, batch: EvalBatch, options: dict[str, Any]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row of `batch`, the nats of its scored targets and how many there are, from the model's own
    loss row by row (`per_row=True`): the units an evaluation of that loss averages."""
    row_loss, _ = model(batch.inputs, batch.targets, per_row=True, **options)
    tokens = (batch.targets != IGNORE_INDEX).sum(-1).to(torch.float64)
    return row_loss.double() * tokens, tokens


def resolve_model_config(model: ModelConfig, datasets: list[OpenedDataset]) -> ModelConfig:
    """The model config with its vocabulary resolved from the tokenizer and checked against it."""
    tokenizer_vocab = max(ds.vocab_size for ds in datasets)
    if model.vocab_size is None:
        model = model.with_vocab_size(tokenizer_vocab)
    check_vocab(datasets, model.vocab_size)
    return model
