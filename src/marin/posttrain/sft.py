"""`SftObjective`: supervised fine-tuning, the loss on the assistant's tokens of packed conversations.

Conversations are rendered once and packed whole into windows (`chat_batches.PackedChats`); every
target that is not the assistant's is -100, which the model's own loss skips, so the objective is
the model's loss (plus its auxiliary losses), as in language modelling. The held-out conversations,
packed in order, are scored window by window with that same loss: `eval_loss`, nats per reply token.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch import nn

from marin.data.file_documents import ShardStats
from marin.posttrain.chat_batches import PackedChats, render_conversations
from marin.posttrain.chat_objective import ChatObjective, PostTraining
from marin.training.errors import TrainingDataError
from marin.training.language_modeling import model_loss, row_nats
from marin.training.objective import EvalBatch, ObjectiveLoss


class SftObjective(ChatObjective):
    """Supervised fine-tuning: conversations packed into windows, the loss on the assistant's tokens."""

    kind = PostTraining.SFT
    score_names = ("loss",)

    def render(self) -> None:
        stats = ShardStats()
        width = self.run.config.seq_len + 1
        self.rendered = render_conversations(
            self.tokenizer, self.data.conversations(stats), self.eos_id, width
        )
        if self.rendered.count == 0:
            raise TrainingDataError(
                f"the chat data ({self.data.describe()}) holds no conversation to train on"
                + (f" ({stats.bad_records} malformed records skipped)" if stats.bad_records else "")
            )
        self.data_summary = {
            "conversations": self.rendered.count,
            "tokens": self.rendered.num_tokens,
            "target_tokens": self.rendered.num_target_tokens,
            "truncated": self.rendered.truncated,
            "dropped": self.rendered.dropped,
            "bad_records": stats.bad_records,
        }
        self.validation_windows = self._pack_validation()

    def _pack_validation(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """The held-out conversations packed in order once, one (inputs, targets) row per window."""
        if self.validation is None:
            return []
        width = self.run.config.seq_len + 1
        data = render_conversations(
            self.tokenizer, self.validation.conversations(ShardStats()), self.eos_id, width
        )
        if not data.count:
            return []
        loader = PackedChats(
            data, seq_len=self.run.config.seq_len, batch_size=1, seed=0, eos_id=self.eos_id, shuffle=False
        )
        windows = []
        while loader.epoch == 0:
            windows.append(loader.next_batch())
        return windows

    def train_loader(self) -> PackedChats:
        config = self.run.config
        return PackedChats(
            self.rendered,
            seq_len=config.seq_len,
            batch_size=config.batch_size,
            seed=config.seed,
            eos_id=self.eos_id,
            rank=self.run.rank,
            world_size=self.run.world_size,
        )

    def loss(
        self, model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, options: dict[str, Any]
    ) -> ObjectiveLoss:
        return model_loss(model, inputs, targets, options)

    def eval_batches(self, lockstep: bool) -> Iterator[EvalBatch]:
        return self.eval_units(self.validation_windows, lockstep)

    def scores(
        self, model: nn.Module, batch: EvalBatch, options: dict[str, Any]
    ) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """Per window: the nats of its reply tokens and how many there are."""
        return {"loss": row_nats(model, batch, options)}
