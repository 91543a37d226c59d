"""load_model: a train step's output, one of its checkpoints and its Hugging Face export give one model."""

from __future__ import annotations

import os

import pytest
import torch
from train_child import arch_config

from marin.training import load_model
from marin.training.datasets import DatasetInput
from marin.training.errors import CheckpointError
from marin.training.trainer import TrainJob, train


def test_a_train_output_its_checkpoint_and_its_export_load_as_one_model_in_eval_mode(story_cache, tmp_path):
    out = str(tmp_path / "run")
    summary = train(
        TrainJob(arch_config("qwen3", 4, checkpoint_every=2), (DatasetInput("s", story_cache, 1.0),), out)
    )
    tokens = torch.randint(0, summary["vocab_size"], (2, 40), generator=torch.Generator().manual_seed(0))
    paths = (out, os.path.join(out, "checkpoints", "step-00000002"), os.path.join(out, "hf"))
    loaded = {path: load_model(path) for path in paths}
    for model, config in loaded.values():
        assert config.architecture == "qwen3" and not model.training
    with torch.no_grad():
        final, from_export, early = (loaded[p][0](tokens) for p in (paths[0], paths[2], paths[1]))
    torch.testing.assert_close(
        final, from_export, rtol=1e-5, atol=1e-5
    )  # the newest checkpoint is the export
    assert not torch.allclose(final, early)  # step 2's weights are another model
    with pytest.raises(CheckpointError, match="not a train step's output"):
        load_model(str(tmp_path))
