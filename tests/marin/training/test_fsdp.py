"""FSDP (FSDP2 `fully_shard`, fp32, CPU, gloo) across a gang of replicas computes what one process
does, and writes sharded checkpoints (torch.distributed.checkpoint) that reshard on load: a run
checkpointed at world size 2 resumes at world size 1, and its weights load into a plain model with
the logits of the model that was saved."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil

import pytest
import torch
from train_child import GANG_STEPS, FailAfterStep, Stop, arch_config, tiny_config

import storage
from fray.cluster import LocalCluster, ResourceConfig
from marin.execution.arguments import DeclarationError
from marin.training.config import Parallelism
from marin.training.datasets import DatasetInput
from marin.training.init_weights import load_init_weights
from marin.training.launch import run_job
from marin.training.trainer import TrainJob

pytestmark = pytest.mark.timeout(600)
STEPS = GANG_STEPS  # as single_run's (conftest.py)


def _metrics(out) -> list[dict]:
    return storage.read_records(os.path.join(out, "metrics.jsonl"))


def _assert_same_losses(single: str, other: str) -> None:
    a, b = _metrics(single), _metrics(other)
    assert len(a) == len(b) == STEPS
    for ra, rb in zip(a, b, strict=False):
        assert ra["loss"] == pytest.approx(rb["loss"], rel=1e-5), ra["step"]


@pytest.fixture(scope="module")
def fsdp_gang_run(story_cache, tmp_path_factory):
    """A 2-replica FSDP run on a LocalCluster, to the end (checkpoints every 3 steps)."""
    out = str(tmp_path_factory.mktemp("fsdp") / "run")
    job = TrainJob(
        tiny_config(STEPS, checkpoint_every=3, parallelism="fsdp"),
        (DatasetInput("stories", story_cache, 1.0),),
        out,
    )
    cluster = LocalCluster(cpu=2)
    try:
        summary = cluster.submit(
            functools.partial(run_job, job, 1),
            name="train-fsdp",
            resources=ResourceConfig.with_cpu(1, replicas=2),
        ).result(timeout=540)
    finally:
        cluster.shutdown()
    return out, summary


def test_two_replica_fsdp_matches_one_process_of_the_same_global_batch(fsdp_gang_run, single_run):
    out, summary = fsdp_gang_run
    assert (summary["world_size"], summary["parallelism"]) == (2, "fsdp")
    _assert_same_losses(single_run, out)
    rows = _metrics(out)
    assert {(r["world_size"], r["parallelism"]) for r in rows} == {(2, "fsdp")}
    assert rows[-1]["eval_loss"] == pytest.approx(_metrics(single_run)[-1]["eval_loss"], rel=1e-5)


def test_an_fsdp_checkpoint_holds_each_ranks_shards_under_checksums(fsdp_gang_run):
    out, _ = fsdp_gang_run
    folder = os.path.join(out, "checkpoints", "step-00000020")
    assert sorted(os.listdir(os.path.join(folder, "dcp"))) == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    checksums = json.load(open(os.path.join(folder, "checksums.json")))
    assert set(checksums) == {"state.json", "dcp/.metadata", "dcp/__0_0.distcp", "dcp/__1_0.distcp"}
    assert sorted(os.listdir(os.path.join(out, "checkpoints"))) == ["step-00000018", "step-00000020"]


def test_weights_saved_at_world_size_two_give_the_saved_models_logits_in_a_plain_model(
    fsdp_gang_run, story_cache
):
    out, summary = fsdp_gang_run
    config = tiny_config(STEPS).model.with_vocab_size(summary["vocab_size"])
    from_checkpoint, from_export = config.build(), config.build()
    record = load_init_weights(out, from_checkpoint, config)  # newest checkpoint: the sharded step-20
    assert record["path"].endswith("step-00000020/dcp")
    load_init_weights(
        os.path.join(out, "hf"), from_export, config
    )  # rank 0 gathered the shards for the export
    tokens = torch.randint(0, config.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(from_checkpoint(tokens), from_export(tokens), rtol=1e-6, atol=1e-6)
        assert not torch.allclose(config.build()(tokens), from_export(tokens))  # a fresh model differs


@pytest.fixture(scope="module")
def fsdp_gang_stopped_after_9(story_cache, tmp_path_factory) -> str:
    """A 2-replica FSDP run on a LocalCluster stopped on purpose after step 9 (checkpoints every 3):
    the sharded checkpoint each resume below copies and resumes at world size 1."""
    out = str(tmp_path_factory.mktemp("fsdp-stopped") / "run")
    job = TrainJob(
        tiny_config(STEPS, checkpoint_every=3, parallelism="fsdp", callbacks=(FailAfterStep(9),)),
        (DatasetInput("stories", story_cache, 1.0),),
        out,
    )
    cluster = LocalCluster(cpu=2)
    try:
        future = cluster.submit(
            functools.partial(run_job, job, 1),
            name="train-fsdp",
            resources=ResourceConfig.with_cpu(1, replicas=2),
        )
        with pytest.raises(Stop):
            future.result(timeout=540)
    finally:
        cluster.shutdown()
    return out


@pytest.mark.parametrize("parallelism", ["fsdp", "ddp"])
def test_an_fsdp_run_checkpointed_at_world_size_two_resumes_at_world_size_one(
    fsdp_gang_stopped_after_9, story_cache, single_run, tmp_path, parallelism
):
    datasets = (DatasetInput("stories", story_cache, 1.0),)
    out = str(tmp_path / "run")
    shutil.copytree(fsdp_gang_stopped_after_9, out)  # each resume gets its own copy of the stopped run
    # the sharded checkpoint reshards onto one FSDP process, or loads into a plain (DDP-style) model
    summary = run_job(
        TrainJob(tiny_config(STEPS, checkpoint_every=3, parallelism=parallelism), datasets, out),
        num_processes=1,
    )
    assert summary["resumed_from_step"] == 9 and summary["world_size"] == 1
    rows = _metrics(out)
    assert [r["world_size"] for r in rows] == [2] * 9 + [1] * (STEPS - 9)
    assert [r["parallelism"] for r in rows] == ["fsdp"] * 9 + [parallelism] * (STEPS - 9)
    _assert_same_losses(single_run, out)


@pytest.mark.slow  # resharding on resume: world size 2 -> 1 (above) runs in the default tier
def test_an_fsdp_checkpoint_written_at_world_size_two_resumes_at_world_size_three(story_cache, tmp_path):
    datasets = (DatasetInput("stories", story_cache, 1.0),)
    single, out = str(tmp_path / "single"), str(tmp_path / "run")
    run_job(
        TrainJob(tiny_config(STEPS, batch_size=6, checkpoint_every=None), datasets, single), num_processes=1
    )
    config = tiny_config(
        STEPS, batch_size=6, checkpoint_every=3, parallelism="fsdp"
    )  # 6 rows split over 2 and 3
    cluster = LocalCluster(cpu=3)
    try:
        first = TrainJob(dataclasses.replace(config, callbacks=(FailAfterStep(9),)), datasets, out)
        stopped = cluster.submit(
            functools.partial(run_job, first, 1),
            name="train-fsdp",
            resources=ResourceConfig.with_cpu(1, replicas=2),
        )
        with pytest.raises(Stop):
            stopped.result(timeout=540)
        summary = cluster.submit(
            functools.partial(run_job, TrainJob(config, datasets, out), 1),
            name="train-fsdp",
            resources=ResourceConfig.with_cpu(1, replicas=3),
        ).result(timeout=540)
    finally:
        cluster.shutdown()
    assert summary["resumed_from_step"] == 9 and summary["world_size"] == 3
    assert [r["world_size"] for r in _metrics(out)] == [2] * 9 + [3] * (STEPS - 9)
    _assert_same_losses(single, out)


def test_a_whole_ddp_checkpoint_resumes_as_two_fsdp_shards(story_cache, single_run, tmp_path):
    datasets = (DatasetInput("stories", story_cache, 1.0),)
    out = str(tmp_path / "run")
    with pytest.raises(Stop):  # a DDP-style run writes whole (safetensors) checkpoints
        run_job(
            TrainJob(tiny_config(STEPS, checkpoint_every=3, callbacks=(FailAfterStep(9),)), datasets, out),
            num_processes=1,
        )
    assert os.path.exists(os.path.join(out, "checkpoints", "step-00000009", "model.safetensors"))
    job = TrainJob(tiny_config(STEPS, checkpoint_every=3, parallelism="fsdp"), datasets, out)
    cluster = LocalCluster(cpu=2)
    try:  # each of 2 FSDP ranks takes its shards of the whole weights and AdamW moments
        summary = cluster.submit(
            functools.partial(run_job, job, 1),
            name="train-fsdp",
            resources=ResourceConfig.with_cpu(1, replicas=2),
        ).result(timeout=540)
    finally:
        cluster.shutdown()
    assert summary["resumed_from_step"] == 9 and summary["world_size"] == 2
    _assert_same_losses(single_run, out)


def test_a_corrupt_shard_falls_back_to_the_checkpoint_before(story_cache, single_run, tmp_path, capfd):
    datasets = (DatasetInput("stories", story_cache, 1.0),)
    out = str(tmp_path / "run")
    config = tiny_config(STEPS, checkpoint_every=3, parallelism="fsdp")
    with pytest.raises(Stop):  # one FSDP process (a process group of one)
        run_job(
            TrainJob(dataclasses.replace(config, callbacks=(FailAfterStep(9),)), datasets, out),
            num_processes=1,
        )
    shard = os.path.join(out, "checkpoints", "step-00000009", "dcp", "__0_0.distcp")
    data = bytearray(open(shard, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(shard, "wb").write(bytes(data))
    summary = run_job(TrainJob(config, datasets, out), num_processes=1)
    assert summary["resumed_from_step"] == 6
    assert "step-00000009: checkpoint" in capfd.readouterr().out
    _assert_same_losses(single_run, out)


def test_parallelism_must_be_ddp_or_fsdp():
    assert tiny_config(1, parallelism="fsdp").parallelism is Parallelism.FSDP
    with pytest.raises(DeclarationError, match=r"parallelism='zero3' is not one of 'ddp', 'fsdp'"):
        tiny_config(1, parallelism="zero3")


@pytest.mark.parametrize("arch", ["qwen3", "olmo2"])
def test_fsdp_shards_every_architecture_per_block_and_trains_as_one_plain_process(
    story_cache, tmp_path, arch
):
    datasets = (DatasetInput("stories", story_cache, 1.0),)
    plain, sharded = str(tmp_path / "plain"), str(tmp_path / "fsdp")
    run_job(TrainJob(arch_config(arch, 4, checkpoint_every=None), datasets, plain), num_processes=1)
    summary = run_job(
        TrainJob(arch_config(arch, 4, checkpoint_every=None, parallelism="fsdp"), datasets, sharded),
        num_processes=1,
    )
    assert summary["parallelism"] == "fsdp"
    assert os.listdir(os.path.join(sharded, "checkpoints", "step-00000004", "dcp"))  # the sharded format
    for a, b in zip(_metrics(plain), _metrics(sharded), strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5), a["step"]
