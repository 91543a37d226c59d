"""Every architecture's nano size learns on the embedded corpus and resumes bit-identically after a kill.

30 steps reach a loss below the unigram entropy of the training tokens (what a model that ignores
context can reach). A run SIGKILLed after step 15 (its newest checkpoint is step 10) and rerun ends
with the weights, optimizer state and metrics of an uninterrupted run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from safetensors.torch import load_file
from train_child import arch_config

import storage
from experiments.models import NANO
from marin.training.datasets import DatasetInput
from marin.training.trainer import TrainJob, train

CHILD = os.path.join(os.path.dirname(__file__), "train_child.py")
TIMING = {"tokens_per_s", "mfu", "step_seconds", "data_wait_s"}
STEPS = 30


def _metrics(out: str) -> list[dict]:
    return [
        {k: v for k, v in r.items() if k not in TIMING}
        for r in storage.read_records(os.path.join(out, "metrics.jsonl"))
    ]


@pytest.mark.parametrize("arch", sorted(NANO))
def test_each_architecture_learns_in_30_steps_and_resumes_bit_identically_after_a_kill(
    story_cache, tmp_path, arch
):
    straight, killed = str(tmp_path / "straight"), str(tmp_path / "killed")
    datasets = (DatasetInput("stories", story_cache, 1.0),)
    child = subprocess.run(
        [sys.executable, CHILD, story_cache, killed, str(STEPS), "15", arch],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
    assert os.listdir(os.path.join(killed, "checkpoints")) == ["step-00000010"]  # the kill lost 11..15
    resumed = train(TrainJob(arch_config(arch, STEPS), datasets, killed))
    summary = train(TrainJob(arch_config(arch, STEPS), datasets, straight))

    assert summary["architecture"] == arch and resumed["resumed_from_step"] == 10
    assert summary["final_loss"] < summary["train_unigram_entropy"]
    assert summary["final_eval_loss"] < summary["train_unigram_entropy"]
    for name in ("model.safetensors", "optimizer.safetensors"):
        a = load_file(os.path.join(straight, "checkpoints", "step-00000030", name))
        b = load_file(os.path.join(killed, "checkpoints", "step-00000030", name))
        assert a.keys() == b.keys() and all(a[k].equal(b[k]) for k in a), name
    assert _metrics(straight) == _metrics(killed)
    assert [r["step"] for r in _metrics(killed)] == list(range(1, STEPS + 1))
