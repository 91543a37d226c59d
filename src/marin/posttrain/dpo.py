"""The DPO loss (Rafailov et al. 2023, "Direct Preference Optimization", eq. 7) and what it logs.

For a prompt x with a preferred answer y_w and a rejected one y_l, a policy pi and a frozen reference:

    loss = -log sigmoid( beta * [ (log pi(y_w|x) - log ref(y_w|x)) - (log pi(y_l|x) - log ref(y_l|x)) ] )

averaged over pairs, where log pi(y|x) is the sum of the answer tokens' log-probabilities (the prompt's
are not counted). The implicit rewards are beta * (log pi(y|x) - log ref(y|x)) for each answer; the
margin is chosen's reward minus rejected's, and the accuracy the fraction of pairs whose margin is
positive. The names of what is logged follow TRL's (`rewards/chosen`, `rewards/margins`, ...).
`label_smoothing` e > 0 is conservative DPO (Mitchell 2023): the preference label is taken to be
wrong with probability e.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from marin.training.models.layers import IGNORE_INDEX


@dataclass(frozen=True)
class DpoLoss:
    """The mean DPO loss over a batch of pairs, and per pair the implicit rewards (detached)."""

    loss: torch.Tensor
    chosen_rewards: torch.Tensor
    rejected_rewards: torch.Tensor

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
    )


def sequence_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per row, the sum of the log-probabilities of its scored targets (those not IGNORE_INDEX): shape (rows,)."""
    nll = F.cross_entropy(
        logits.flatten(0, 1).float(), targets.flatten(), ignore_index=IGNORE_INDEX, reduction="none"
    )
    return -nll.view(targets.shape).sum(-1)
