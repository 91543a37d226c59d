"""DPO (Rafailov et al. 2023, "Direct Preference Optimization", eq. 7): its loss, what it logs, and
`DpoObjective`, the post-training objective that trains with it.

For a prompt x with a preferred answer y_w and a rejected one y_l, a policy pi and a frozen reference:

    loss = -log sigmoid( beta * [ (log pi(y_w|x) - log ref(y_w|x)) - (log pi(y_l|x) - log ref(y_l|x)) ] )

averaged over pairs, where log pi(y|x) is the sum of the answer tokens' log-probabilities (the prompt's
are not counted). The implicit rewards are beta * (log pi(y|x) - log ref(y|x)) for each answer; the
margin is chosen's reward minus rejected's, and the accuracy the fraction of pairs whose margin is
positive. The names of what is logged follow TRL's (`rewards/chosen`, `rewards/margins`, ...).
`label_smoothing` e > 0 is conservative DPO (Mitchell 2023): the preference label is taken to be
wrong with probability e.

`DpoObjective` renders each pair as two rows (`pair_batches`), computes the policy's and the frozen
reference's answer log-probabilities, and minimises this loss; its evaluation scores the held-out
pairs with the same loss, pair by pair: `eval_loss`, `eval_rewards/accuracies`, `eval_rewards/margins`.
The reference is `reference`'s weights, else the starting weights (a copy made before the first step;
with LoRA the same model with its adapters off, so nothing is copied).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from marin.data.file_documents import ShardStats
from marin.posttrain.chat_objective import ChatObjective, PostTraining
from marin.posttrain.lora import adapters_disabled
from marin.posttrain.pair_batches import PairBatches, render_pairs
from marin.training.errors import TrainingDataError
from marin.training.init_weights import load_init_weights
from marin.training.models.layers import IGNORE_INDEX
from marin.training.objective import EvalBatch, ObjectiveLoss


@dataclass(frozen=True)
class DpoLoss:
    """The mean DPO loss over a batch of pairs, and per pair its loss and the implicit rewards (detached)."""

    loss: torch.Tensor
    chosen_rewards: torch.Tensor
    rejected_rewards: torch.Tensor
    losses: torch.Tensor

    @property
    def margins(self) -> torch.Tensor:
        return self.chosen_rewards - self.rejected_rewards

    def metrics(self) -> dict[str, float]:
        """Batch means of the rewards, margins and accuracy, under TRL's names."""
        return {
            "rewards/chosen": float(self.chosen_rewards.mean()),
            "rewards/rejected": float(self.rejected_rewards.mean()),
            "rewards/margins": float(self.margins.mean()),
            "rewards/accuracies": float((self.margins > 0).float().mean()),
        }


def dpo_loss(
    policy_chosen: torch.Tensor,
    policy_rejected: torch.Tensor,
    reference_chosen: torch.Tensor,
    reference_rejected: torch.Tensor,
    beta: float,
    label_smoothing: float = 0.0,
) -> DpoLoss:
    """The DPO loss from per-pair answer log-probabilities (each of shape (pairs,)) of policy and reference."""
    logits = (policy_chosen - reference_chosen) - (policy_rejected - reference_rejected)
    losses = (
        -F.logsigmoid(beta * logits) * (1 - label_smoothing) - F.logsigmoid(-beta * logits) * label_smoothing
    )
    return DpoLoss(
        loss=losses.mean(),
        chosen_rewards=(beta * (policy_chosen - reference_chosen)).detach(),
        rejected_rewards=(beta * (policy_rejected - reference_rejected)).detach(),
        losses=losses.detach(),
    )


def sequence_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per row, the sum of the log-probabilities of its scored targets (those not IGNORE_INDEX): shape (rows,)."""
    nll = F.cross_entropy(
        logits.flatten(0, 1).float(), targets.flatten(), ignore_index=IGNORE_INDEX, reduction="none"
    )
    return -nll.view(targets.shape).sum(-1)


class DpoObjective(ChatObjective):
    """DPO: pairs of answers, the policy pushed towards the chosen one relative to a frozen reference
    (see the module docstring). `beta`, `label_smoothing` and `reference` (a folder, None: the
    starting weights) are the loss's."""

    kind = PostTraining.DPO
    score_names = ("loss", "rewards/accuracies", "rewards/margins")

    def __init__(
        self,
        data: Any,
        validation: Any = None,
        *,
        beta: float = 0.1,
        label_smoothing: float = 0.0,
        reference: str | None = None,
        **chat: Any,
    ):
        super().__init__(data, validation, **chat)
        self.beta, self.label_smoothing, self.reference_path = beta, label_smoothing, reference

    def fingerprint_fields(self) -> dict[str, Any]:
        return {
            **super().fingerprint_fields(),
            "beta": self.beta,
            "label_smoothing": self.label_smoothing,
            "reference": self.reference_path is not None,
        }

    def render(self) -> None:
        stats = ShardStats()
        width = self.run.config.seq_len + 1
        self.pairs = render_pairs(self.tokenizer, self.data.pairs(stats), self.eos_id, width)
        if self.pairs.count == 0:
            raise TrainingDataError(
                f"the preference data ({self.data.describe()}) holds no pair that fits seq_len="
                f"{self.run.config.seq_len} ({self.pairs.skipped} too long)"
            )
        self.data_summary = {
            "pairs": self.pairs.count,
            "too_long": self.pairs.skipped,
            "bad_records": stats.bad_records,
        }
        self.validation_pairs = []
        if self.validation is not None:
            held_out = render_pairs(self.tokenizer, self.validation.pairs(ShardStats()), self.eos_id, width)
            if held_out.count:
                loader = PairBatches(held_out, batch_size=1, seed=0, shuffle=False)
                while loader.epoch == 0:
                    self.validation_pairs.append(loader.next_batch())

    def prepare_model(self, model: nn.Module) -> nn.Module:
        trainable = super().prepare_model(model)
        self.reference: nn.Module | None = None
        if self.reference_path is not None:
            self.reference = self.model_config.build().to(self.run.device)
            load_init_weights(self.reference_path, self.reference, self.model_config)
        elif self.lora is None:
            self.reference = copy.deepcopy(model)  # the starting weights, before any step
        if self.reference is not None:
            self.reference.eval().requires_grad_(False)
        return trainable

    def train_loader(self) -> PairBatches:
        config = self.run.config
        return PairBatches(
            self.pairs,
            batch_size=config.batch_size,
            seed=config.seed,
            rank=self.run.rank,
            world_size=self.run.world_size,
        )

    def _reference_logprobs(
        self, inputs: torch.Tensor, targets: torch.Tensor, options: dict[str, Any]
    ) -> torch.Tensor:
        with torch.no_grad():
            if self.reference is None:
                with adapters_disabled(self.model):
                    logits = self.model(inputs, **options)
            else:
                logits = self.reference(inputs, **options)
            return sequence_logprobs(logits, targets)

    def pair_loss(
        self, model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, options: dict[str, Any]
    ) -> tuple[DpoLoss, torch.Tensor]:
        """The DPO loss of interleaved (chosen, rejected) rows, and the policy's answer log-probabilities."""
        options = {k: v for k, v in options.items() if k != "z_loss"}  # DPO scores log-probabilities only
        policy = sequence_logprobs(model(inputs, **options), targets)
        reference = self._reference_logprobs(inputs, targets, options)
        out = dpo_loss(
            policy[0::2], policy[1::2], reference[0::2], reference[1::2], self.beta, self.label_smoothing
        )
        return out, policy

    def loss(
        self, model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, options: dict[str, Any]
    ) -> ObjectiveLoss:
        """DPO on one microbatch of interleaved (chosen, rejected) rows; logs TRL's figures."""
        out, policy = self.pair_loss(model, inputs, targets, options)
        logged = {name: torch.tensor(value) for name, value in out.metrics().items()}
        logged["logps/chosen"] = policy[0::2].detach().mean()
        logged["logps/rejected"] = policy[1::2].detach().mean()
        return ObjectiveLoss(out.loss, out.loss, logged)

    def eval_batches(self, lockstep: bool) -> Iterator[EvalBatch]:
        return self.eval_units(self.validation_pairs, lockstep)

    def scores(
        self, model: nn.Module, batch: EvalBatch, options: dict[str, Any]
    ) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """Per pair: its loss, whether the chosen answer won (margin > 0), and its reward margin."""
        out, _ = self.pair_loss(model, batch.inputs, batch.targets, options)
        ones = torch.ones_like(out.losses)
        return {
            "loss": (out.losses, ones),
            "rewards/accuracies": ((out.margins > 0).to(ones.dtype), ones),
            "rewards/margins": (out.margins, ones),
        }
