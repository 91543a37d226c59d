"""AdamConfig: AdamW with decay on matrices only and the warmup / decay schedules."""

import pytest
import torch

from marin.training.errors import TrainingConfigError
from marin.training.models import LlamaConfig
from marin.training.optim import AdamConfig


def _model():
    return LlamaConfig(hidden_dim=16, intermediate_dim=32, num_layers=1, num_heads=2, vocab_size=50).build()


def test_weight_decay_applies_to_matrices_and_not_to_norm_weights():
    model = _model()
    optimizer = AdamConfig(learning_rate=1e-3, weight_decay=0.1).build(model)
    decayed = {id(p) for g in optimizer.param_groups if g["weight_decay"] > 0 for p in g["params"]}
    for name, p in model.named_parameters():
        assert (id(p) in decayed) == (p.dim() >= 2), name
    assert sum(len(g["params"]) for g in optimizer.param_groups) == len(list(model.parameters()))
    assert isinstance(optimizer, torch.optim.AdamW)


def test_cosine_schedule_warms_up_then_decays_to_the_minimum_ratio():
    adam = AdamConfig(learning_rate=1.0, warmup=10, lr_schedule="cosine", min_lr_ratio=0.1)
    lrs = [adam.lr_at(s, 110) for s in range(110)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(lrs[9:], lrs[10:], strict=False))
    assert lrs[-1] == pytest.approx(0.1)
    assert (lrs[59] + lrs[60]) / 2 == pytest.approx(0.1 + 0.9 * 0.5, rel=1e-3)  # half way through the decay


def test_linear_and_constant_schedules_and_fractional_warmup():
    linear = AdamConfig(learning_rate=2.0, warmup=0.1, lr_schedule="linear", min_lr_ratio=0.0)
    assert linear.warmup_steps(100) == 10
    assert linear.lr_at(99, 100) == pytest.approx(0.0)
    assert linear.lr_at(10 + 89 // 2, 100) == pytest.approx(1.0, rel=0.02)
    constant = AdamConfig(learning_rate=2.0, warmup=0, lr_schedule="constant")
    assert {constant.lr_at(s, 50) for s in range(50)} == {2.0}


def test_invalid_hyperparameters_name_the_field():
    with pytest.raises(TrainingConfigError, match="lr_schedule"):
        AdamConfig(lr_schedule="step")
    with pytest.raises(TrainingConfigError, match="learning_rate"):
        AdamConfig(learning_rate=0)
    with pytest.raises(TrainingConfigError, match="beta2"):
        AdamConfig(beta2=1.0)
