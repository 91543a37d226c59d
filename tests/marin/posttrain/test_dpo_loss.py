"""The DPO loss equals the paper's formula, computed here independently, and its logged figures TRL's."""

from __future__ import annotations

import math

import torch

from marin.posttrain.dpo import dpo_loss, sequence_logprobs
from marin.training.models.layers import IGNORE_INDEX


def _paper_loss(pc, pr, rc, rr, beta, smoothing=0.0) -> float:
    """Eq. 7 of Rafailov et al. (2023), with conservative DPO's label smoothing, in float64 Python."""
    total = 0.0
    for a, b, c, d in zip(pc, pr, rc, rr, strict=True):
        h = beta * ((a - c) - (b - d))
        log_sig, log_one_minus_sig = -math.log1p(math.exp(-h)), -math.log1p(math.exp(h))
        total += -(1 - smoothing) * log_sig - smoothing * log_one_minus_sig
    return total / len(pc)


def test_the_loss_equals_the_papers_formula_on_a_fixed_batch():
    g = torch.Generator().manual_seed(0)
    logps = [(-20 * torch.rand(16, generator=g, dtype=torch.float64)) for _ in range(4)]
    for beta in (0.1, 0.5, 2.0):
        for smoothing in (0.0, 0.2):
            out = dpo_loss(*logps, beta=beta, label_smoothing=smoothing)
            expected = _paper_loss(*(t.tolist() for t in logps), beta=beta, smoothing=smoothing)
            assert abs(out.loss.item() - expected) < 1e-6


def test_rewards_margins_and_accuracy_are_trls_definitions():
    pc, pr = torch.tensor([-1.0, -5.0, -2.0]), torch.tensor([-3.0, -4.0, -2.5])
    rc, rr = torch.tensor([-2.0, -4.0, -2.0]), torch.tensor([-2.0, -4.0, -2.0])
    out = dpo_loss(pc, pr, rc, rr, beta=0.5)
    assert out.chosen_rewards.tolist() == [0.5, -0.5, 0.0]
    assert out.rejected_rewards.tolist() == [-0.5, 0.0, -0.25]
    m = out.metrics()
    assert abs(m["rewards/margins"] - (1.0 - 0.5 + 0.25) / 3) < 1e-7
    assert abs(m["rewards/accuracies"] - 2 / 3) < 1e-7
    assert m["rewards/chosen"] == 0.0


def test_sequence_log_probabilities_sum_only_the_scored_tokens():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 5, 7, generator=g)
    targets = torch.tensor([[IGNORE_INDEX, IGNORE_INDEX, 3, 1, IGNORE_INDEX], [IGNORE_INDEX, 2, 2, 2, 6]])
    logp = torch.log_softmax(logits, -1)
    expected = [
        logp[0, 2, 3] + logp[0, 3, 1],
        logp[1, 1, 2] + logp[1, 2, 2] + logp[1, 3, 2] + logp[1, 4, 6],
    ]
    assert torch.allclose(sequence_logprobs(logits, targets), torch.stack(expected), atol=1e-6)
