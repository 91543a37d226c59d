"""Checkpoints: complete or invisible, pruned to keep_last_k, refused by a run with another configuration."""

import os
import random

import numpy as np
import pytest
import torch

from marin.training.checkpoint import (
    TrainState,
    list_checkpoints,
    load_checkpoint,
    load_latest_intact,
    save_checkpoint,
)
from marin.training.errors import CheckpointError
from marin.training.models import LlamaConfig
from marin.training.optim import AdamConfig
from marin.training.rng import capture_rng, restore_rng

CONFIG = LlamaConfig(
    hidden_dim=16, intermediate_dim=32, num_layers=1, num_heads=2, vocab_size=40, tie_embeddings=True
)


def _trained(seed: int):
    torch.manual_seed(seed)
    model = CONFIG.build()
    optimizer = AdamConfig(learning_rate=1e-2, weight_decay=0.1).build(model)
    model(torch.randint(0, 40, (2, 8))).sum().backward()
    optimizer.step()
    return model, optimizer


def _save(directory, model, optimizer, step, keep=None, fingerprint="abc"):
    state = TrainState(step, {"samples": step}, capture_rng(), fingerprint, {})
    return save_checkpoint(str(directory), model=model, optimizer=optimizer, state=state, keep_last_k=keep)


def test_saved_checkpoint_restores_model_optimizer_and_loader_state(tmp_path):
    model, optimizer = _trained(0)
    _save(tmp_path, model, optimizer, 5)
    other, other_opt = _trained(1)
    state = load_checkpoint(str(tmp_path), 5, model=other, optimizer=other_opt, config_fingerprint="abc")
    assert state.step == 5 and state.loader == {"samples": 5}
    for (name, a), b in zip(model.named_parameters(), other.parameters(), strict=False):
        assert torch.equal(a, b), name
    for p, q in zip(model.parameters(), other.parameters(), strict=False):
        for field in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(optimizer.state[p][field], other_opt.state[q][field])


def test_only_the_last_k_checkpoints_are_kept_and_leftovers_of_a_killed_writer_are_ignored(tmp_path):
    model, optimizer = _trained(0)
    os.makedirs(tmp_path / ".tmp-step-00000009-dead")  # a writer killed half way
    assert list_checkpoints(str(tmp_path)) == []
    for step in (2, 4, 6, 8):
        _save(tmp_path, model, optimizer, step, keep=2)
    assert list_checkpoints(str(tmp_path)) == [6, 8]
    assert sorted(os.listdir(tmp_path)) == ["step-00000006", "step-00000008"]


def test_a_checkpoint_from_another_configuration_is_refused(tmp_path):
    model, optimizer = _trained(0)
    _save(tmp_path, model, optimizer, 3, fingerprint="abc")
    with pytest.raises(CheckpointError, match="another configuration"):
        load_checkpoint(str(tmp_path), 3, model=model, optimizer=optimizer, config_fingerprint="xyz")


def test_rng_states_round_trip_through_json():
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    state = capture_rng()
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    random.seed(2), np.random.seed(2), torch.manual_seed(2)
    restore_rng(state)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected


def test_a_truncated_checkpoint_is_skipped_for_the_one_before_and_none_intact_is_an_error(tmp_path):
    model, optimizer = _trained(0)
    _save(tmp_path, model, optimizer, 2)
    newer, newer_opt = _trained(1)
    _save(tmp_path, newer, newer_opt, 4)
    with open(tmp_path / "step-00000004" / "model.safetensors", "r+b") as f:
        f.truncate(10)  # loading these bytes raw would raise a SafetensorError
    logged = []
    fresh, fresh_opt = _trained(2)
    state = load_latest_intact(
        str(tmp_path), model=fresh, optimizer=fresh_opt, config_fingerprint="abc", log=logged.append
    )
    assert state.step == 2
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), fresh.parameters(), strict=False))
    written = _size_written(tmp_path)
    assert logged == [
        f"[marin.train] skipped checkpoint {tmp_path}/step-00000004: checkpoint "
        f"{tmp_path}/step-00000004/model.safetensors has 10 bytes, {written} were written"
    ]

    os.remove(tmp_path / "step-00000002" / "checksums.json")
    with pytest.raises(
        CheckpointError,
        match=r"every checkpoint under .* failed verification .*step-00000002 has no "
        r"checksums.json",
    ):
        load_latest_intact(
            str(tmp_path), model=fresh, optimizer=fresh_opt, config_fingerprint="abc", log=logged.append
        )


def _size_written(directory) -> int:
    import json

    return json.loads((directory / "step-00000004" / "checksums.json").read_text())["model.safetensors"][
        "size"
    ]


def test_a_run_checkpoints_by_wall_time_without_a_step_count(story_cache, tmp_path):
    from train_child import SleepEachStep, tiny_config

    from marin.training.datasets import DatasetInput
    from marin.training.trainer import TrainJob, train

    config = tiny_config(
        8,
        checkpoint_every=None,
        checkpoint_every_minutes=0.5 / 60,  # half a second
        keep_last_k=None,
        steps_per_eval=None,
        callbacks=(SleepEachStep(0.3),),  # each step takes at least 0.3 s
    )
    out = str(tmp_path / "run")
    train(TrainJob(config, (DatasetInput("stories", story_cache, 1.0),), out))
    steps = list_checkpoints(os.path.join(out, "checkpoints"))
    assert steps[-1] == 8 and len(steps) >= 4  # at least every other step by time (>= 0.6 s), and at the end
