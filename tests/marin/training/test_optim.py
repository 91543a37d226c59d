"""The optimizers: AdamConfig (decay on matrices only), MuonConfig (Muon + AdamW), schedules, exact resume."""

import pytest
import torch

from marin.execution.arguments import DeclarationError
from marin.training.checkpoint import TrainState, load_checkpoint, save_checkpoint
from marin.training.errors import TrainingConfigError
from marin.training.models import LlamaConfig
from marin.training.optim import AdamConfig, MuonConfig, set_scheduled_lr
from marin.training.schedules import WSD, Constant, Cosine, Linear


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
    adam = AdamConfig(learning_rate=1.0, schedule=Cosine(warmup=10, min_lr_ratio=0.1))
    lrs = [adam.lr_at(s, 110) for s in range(110)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(lrs[9:], lrs[10:], strict=False))
    assert lrs[-1] == pytest.approx(0.1)
    assert (lrs[59] + lrs[60]) / 2 == pytest.approx(0.1 + 0.9 * 0.5, rel=1e-3)  # half way through the decay


def test_linear_and_constant_schedules_and_fractional_warmup():
    linear = AdamConfig(learning_rate=2.0, schedule=Linear(warmup=0.1, min_lr_ratio=0.0))
    assert linear.schedule.warmup_steps(100) == 10
    assert linear.lr_at(99, 100) == pytest.approx(0.0)
    assert linear.lr_at(10 + 89 // 2, 100) == pytest.approx(1.0, rel=0.02)
    constant = AdamConfig(learning_rate=2.0, schedule=Constant(warmup=0))
    assert {constant.lr_at(s, 50) for s in range(50)} == {2.0}


def test_invalid_hyperparameters_name_the_field():
    with pytest.raises(DeclarationError, match="schedule='step' is a str, expected Schedule"):
        AdamConfig(schedule="step")
    with pytest.raises(TrainingConfigError, match="learning_rate"):
        AdamConfig(learning_rate=0)
    with pytest.raises(TrainingConfigError, match="beta2"):
        AdamConfig(beta2=1.0)


def _steps(model, optimizer, config, steps, start=0, n=10):
    """`steps` optimizer steps on fixed random batches, the schedule applied to every group."""
    for step in range(start, start + steps):
        torch.manual_seed(100 + step)
        set_scheduled_lr(optimizer, config, step, n)
        tokens = torch.randint(0, 50, (2, 9))
        loss = torch.nn.functional.cross_entropy(model(tokens[:, :-1]).flatten(0, 1), tokens[:, 1:].flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def test_muon_takes_the_hidden_matrices_and_adamw_the_embeddings_output_and_norms():
    model = _model()
    optimizer = MuonConfig(learning_rate=0.02, adam_learning_rate=1e-3, weight_decay=0.1).build(model)
    muon, adamw = optimizer.optimizers
    assert isinstance(muon, torch.optim.Muon) and isinstance(adamw, torch.optim.AdamW)
    names = {id(p): n for n, p in model.named_parameters()}
    in_muon = {names[id(p)] for g in muon.param_groups for p in g["params"]}
    assert in_muon == {n for n, p in model.named_parameters() if p.dim() == 2} - {
        "embed_tokens.weight",
        "lm_head.weight",
    }
    decayed = {names[id(p)] for g in adamw.param_groups if g["weight_decay"] > 0 for p in g["params"]}
    assert decayed == {"embed_tokens.weight", "lm_head.weight"}
    assert len(in_muon) + sum(len(g["params"]) for g in adamw.param_groups) == len(list(model.parameters()))


def test_each_group_follows_the_schedule_at_its_own_peak():
    config = MuonConfig(learning_rate=0.02, adam_learning_rate=1e-3, schedule=WSD(warmup=4))
    optimizer = config.build(_model())
    schedule = config.schedule
    for step in (0, 3, 9):
        main = set_scheduled_lr(optimizer, config, step, 10)
        assert main == config.lr_at(step, 10) == schedule.lr(step, 10, 0.02)
        muon, adamw = optimizer.optimizers
        assert {g["lr"] for g in muon.param_groups} == {schedule.lr(step, 10, 0.02)}
        assert {g["lr"] for g in adamw.param_groups} == {schedule.lr(step, 10, 1e-3)}


@pytest.mark.parametrize(
    "config", [AdamConfig(learning_rate=1e-2, weight_decay=0.1), MuonConfig(weight_decay=0.1)]
)
def test_a_checkpointed_optimizer_continues_bit_identically(tmp_path, config):
    torch.manual_seed(0)
    model = _model()
    optimizer = config.build(model)
    _steps(model, optimizer, config, 3)
    state = TrainState(3, {}, {}, "fp", {})
    save_checkpoint(str(tmp_path), model=model, optimizer=optimizer, state=state, keep_last_k=None)
    _steps(model, optimizer, config, 3, start=3)

    torch.manual_seed(1)
    resumed = _model()
    resumed_optimizer = config.build(resumed)
    load_checkpoint(str(tmp_path), 3, model=resumed, optimizer=resumed_optimizer, config_fingerprint="fp")
    _steps(resumed, resumed_optimizer, config, 3, start=3)
    for (name, a), b in zip(model.named_parameters(), resumed.parameters(), strict=True):
        assert torch.equal(a, b), name
    slots = {k for p in resumed_optimizer.state for k in resumed_optimizer.state[p]}
    assert slots == (
        {"exp_avg", "exp_avg_sq", "step", "momentum_buffer"}
        if isinstance(config, MuonConfig)
        else {"exp_avg", "exp_avg_sq", "step"}
    )


def test_muon_and_adam_with_the_same_fields_have_different_keys_and_muon_refuses_fsdp():
    assert AdamConfig().describe() != MuonConfig(learning_rate=6e-4).describe()
    assert "optimizer" not in AdamConfig().describe()  # AdamW's key is its fields, as before Muon existed
    with pytest.raises(TrainingConfigError, match="parallelism='ddp'"):
        MuonConfig().check_run(100, sharded=True)
    with pytest.raises(TrainingConfigError, match="adam_learning_rate"):
        MuonConfig(adam_learning_rate=0)
