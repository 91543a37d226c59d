"""SFT, and DPO through LoRA, SIGKILLed mid-run and rerun end bit-identical to uninterrupted runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from safetensors.torch import load_file

import storage
from marin.training.step_metrics import WALL_CLOCK_FIELDS
from marin.training.trainer import train

sys.path.insert(0, os.path.dirname(__file__))
from posttrain_child import posttrain_job  # noqa: E402

CHILD = os.path.join(os.path.dirname(__file__), "posttrain_child.py")
TIMING = WALL_CLOCK_FIELDS
STEPS = 5


def _metrics(out: str) -> list[dict]:
    return [
        {k: v for k, v in r.items() if k not in TIMING} for r in storage.read_records(f"{out}/metrics.jsonl")
    ]


def _same_files(a: str, b: str, names: list[str]) -> None:
    for name in names:
        ta, tb = load_file(os.path.join(a, name)), load_file(os.path.join(b, name))
        assert ta.keys() == tb.keys(), name
        for key in ta:
            assert ta[key].equal(tb[key]), (name, key)


@pytest.mark.parametrize("kind", ["sft", "dpo-lora"])
def test_a_killed_post_training_run_resumes_to_the_uninterrupted_runs_weights_and_metrics(
    kind, chat_model_dir, tmp_path
):
    straight, interrupted = str(tmp_path / "straight"), str(tmp_path / "interrupted")
    train(posttrain_job(chat_model_dir, straight, kind, STEPS))

    killed = subprocess.run(
        [sys.executable, CHILD, chat_model_dir, interrupted, kind, str(STEPS), "3"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    # checkpoints every 2 steps: the kill in step 4 lost steps 3 and 4 beyond the checkpoint of step 2
    assert sorted(os.listdir(os.path.join(interrupted, "checkpoints"))) == ["step-00000002"]
    assert len(_metrics(interrupted)) == 3

    summary = train(posttrain_job(chat_model_dir, interrupted, kind, STEPS))
    assert summary["resumed_from_step"] == 2

    last = f"checkpoints/step-{STEPS:08d}"
    _same_files(straight, interrupted, [f"{last}/model.safetensors", f"{last}/optimizer.safetensors"])
    _same_files(straight, interrupted, ["hf/model.safetensors"])
    assert _metrics(straight) == _metrics(interrupted)
    assert [m["step"] for m in _metrics(interrupted)] == list(range(1, STEPS + 1))
    if kind == "dpo-lora":
        _same_files(straight, interrupted, ["adapter/adapter_model.safetensors"])
        saved = load_file(os.path.join(straight, last, "model.safetensors"))
        assert saved and all(".lora_A." in k or ".lora_B." in k for k in saved)  # adapters only
        assert {"rewards/chosen", "rewards/margins", "rewards/accuracies"} <= _metrics(straight)[0].keys()
        assert "eval_rewards/accuracies" in _metrics(straight)[2]
    else:
        assert "eval_loss" in _metrics(straight)[2]
