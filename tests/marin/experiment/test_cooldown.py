"""Cooldowns: the annealing tutorial's two steps, a base and a cooldown that continues its weights and AdamW
moments with its own schedule and mixture, cached on a rerun."""

import dataclasses
import os

import pytest
import torch
from safetensors.torch import load_file

import storage
from experiments.tutorials.annealing import anneal
from marin.data.corpus import SOURCE_NAME, stories
from marin.data.token_cache import TokenCache
from marin.data.tokenizer_training import train_byte_level_bpe
from marin.execution.lazy import lower
from marin.execution.step_runner import StepRunner
from marin.experiment.data import tokenized
from marin.training.config import config_of
from marin.training.datasets import DatasetInput
from marin.training.errors import CheckpointError
from marin.training.loader import NamedSource, WindowMixture
from marin.training.models import LlamaConfig
from marin.training.optim import MuonConfig
from marin.training.trainer import TrainJob, train
from zephyr import ZephyrConfig

TINY = LlamaConfig(
    hidden_dim=32, intermediate_dim=64, num_layers=2, num_heads=4, num_kv_heads=2, max_seq_len=64
)
SYNC = ZephyrConfig(backend="sync")


@pytest.fixture(scope="module")
def annealed(tmp_path_factory):
    """The tutorial's base (4 steps) and cooldown (3 steps on a new mix), run under one prefix."""
    root = tmp_path_factory.mktemp("anneal")
    tokenizer = str(root / "tokenizer")
    train_byte_level_bpe(stories(0, 300), 384, tokenizer)
    for i, text in enumerate(stories(5000, 5150)):
        (root / f"other-{i:03d}.txt").write_text(text)
    main = tokenized("tokenized/main", tokenizer=tokenizer, source=SOURCE_NAME, sample_count=150, zephyr=SYNC)
    other = tokenized("tokenized/other", tokenizer=tokenizer, paths=[str(root / "other-*.txt")], zephyr=SYNC)
    base, cooldown = anneal(
        "tiny",
        {main: 1.0},
        {main: 0.5, other: 0.5},
        base_steps=4,
        cooldown_steps=3,
        model=TINY,
        batch_size=4,
        seq_len=32,
        checkpoint_every=1,
        keep_last_k=None,
        cpu_threads=1,
    )
    prefix = str(root / "out")
    run = StepRunner(prefix=prefix, progress=False).run([cooldown])
    return prefix, base, cooldown, run


def test_the_cooldown_starts_at_its_own_rate_with_the_base_runs_adamw_moments(annealed):
    prefix, base, cooldown, run = annealed
    base_out, cool_out = run.output_path(lower(base)), run.output_path(lower(cooldown))
    records = storage.read_records(os.path.join(cool_out, "metrics.jsonl"))
    assert records[0]["lr"] == cooldown.optimizer.lr_at(0, 3) == pytest.approx(2e-3)  # linear decay from 3e-3
    # the gradient of the cooldown's first batch at the base's last weights, clipped as the trainer clips
    saved = load_file(os.path.join(base_out, "checkpoints/step-00000004/optimizer.safetensors"))
    weights = load_file(os.path.join(base_out, "checkpoints/step-00000004/model.safetensors"))
    caches = [run.output_path(lower(handle)) for handle in cooldown.datasets]
    splits = [TokenCache.open(path).split("train") for path in caches]
    loader = WindowMixture(
        [NamedSource(str(i), split, 0.5) for i, split in enumerate(splits)], seq_len=32, batch_size=4, seed=0
    )
    rows = torch.from_numpy(loader.next_batch())
    model = TINY.with_vocab_size(TokenCache.open(caches[0]).vocab_size).build()
    model.load_state_dict(weights)
    loss, _ = model(rows[:, :-1], rows[:, 1:])
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(model.parameters()), 1.0)
    after = load_file(os.path.join(cool_out, "checkpoints/step-00000001/optimizer.safetensors"))
    adam = cooldown.optimizer
    for name, param in model.named_parameters():
        g = param.grad
        expected_m = adam.beta1 * saved[f"{name}/exp_avg"] + (1 - adam.beta1) * g
        expected_v = adam.beta2 * saved[f"{name}/exp_avg_sq"] + (1 - adam.beta2) * g * g
        assert torch.allclose(after[f"{name}/exp_avg"], expected_m, rtol=1e-4, atol=1e-9), name
        assert torch.allclose(after[f"{name}/exp_avg_sq"], expected_v, rtol=1e-4, atol=1e-12), name
        assert float(after[f"{name}/step"]) == float(saved[f"{name}/step"]) + 1 == 5.0


def test_the_two_steps_are_cached_on_a_rerun_and_another_optimizer_cannot_continue_the_moments(
    annealed, tmp_path
):
    prefix, base, cooldown, run = annealed
    again = StepRunner(prefix=prefix, progress=False).run([cooldown])
    assert {again.outcomes[run.output_path(lower(s))] for s in (base, cooldown)} == {"cached"}
    muon = dataclasses.replace(config_of(cooldown), optimizer=MuonConfig(adam_learning_rate=1e-3))
    cache = run.output_path(lower(next(iter(cooldown.datasets))))
    job = TrainJob(
        muon,
        (DatasetInput("main", cache, 1.0),),
        str(tmp_path / "muon"),
        init_from=run.output_path(lower(base)),
        init_optimizer=True,
    )
    with pytest.raises(
        CheckpointError, match="written by another optimizer; init_optimizer needs the optimizer"
    ):
        train(job)
