"""A train step counts its compute two ways, kept apart: model FLOPs and hardware FLOPs, with their ratio."""

from __future__ import annotations

import os

import pytest
from train_child import tiny_config

import storage
from marin.training.callbacks import StopAfter
from marin.training.datasets import DatasetInput
from marin.training.trainer import TrainJob, train

PEAK = 2e11  # FLOP/s of the one device, given, so that hardware FLOPs are wall seconds x PEAK exactly


def test_model_and_hardware_flops_are_counted_apart_per_step_and_in_total_across_a_resume(
    story_cache, tmp_path
):
    out = str(tmp_path / "run")
    datasets = (DatasetInput("stories", story_cache, 1.0),)
    config = tiny_config(8, checkpoint_every=None, peak_flops=PEAK, callbacks=(StopAfter(step=4),))
    first = train(TrainJob(config, datasets, out))
    model = config.model.with_vocab_size(first["vocab_size"])
    per_token = model.flops_per_token(config.seq_len)
    tokens_per_step = config.batch_size * config.seq_len

    flops = first["flops"]
    assert flops["flops_per_token"] == per_token and flops["devices"] == 1
    assert flops["peak_flops_per_device"] == PEAK
    assert flops["tokens"] == 4 * tokens_per_step
    assert flops["model"] == pytest.approx(4 * tokens_per_step * per_token)
    assert flops["hardware"] == pytest.approx(flops["wall_seconds"] * PEAK)
    assert flops["ratio"] == pytest.approx(flops["model"] / flops["hardware"])
    assert 0 < flops["ratio"] < 1  # the hardware could always have done more than the model needed

    records = storage.read_records(os.path.join(out, "metrics.jsonl"))
    assert [r["model_flops"] for r in records] == pytest.approx(
        [s * tokens_per_step * per_token for s in (1, 2, 3, 4)]
    )
    hardware = [r["hardware_flops"] for r in records]
    assert hardware == sorted(hardware) and hardware[-1] <= flops["hardware"]
    assert all(r["flops_ratio"] == pytest.approx(r["model_flops"] / r["hardware_flops"]) for r in records)

    resumed = train(TrainJob(tiny_config(8, checkpoint_every=None, peak_flops=PEAK), datasets, out))
    total = resumed["flops"]
    assert resumed["resumed_from_step"] == 4 and total["tokens"] == 8 * tokens_per_step
    assert total["model"] == pytest.approx(8 * tokens_per_step * per_token)
    # the first attempt's wall time up to its checkpoint (taken after step 4's record) is carried on
    carried = records[-1]["hardware_flops"] / PEAK
    records = storage.read_records(os.path.join(out, "metrics.jsonl"))
    assert [r["step"] for r in records] == list(range(1, 9))
    assert records[4]["hardware_flops"] > carried * PEAK and total["wall_seconds"] > carried
    assert total["hardware"] == pytest.approx(total["wall_seconds"] * PEAK)
