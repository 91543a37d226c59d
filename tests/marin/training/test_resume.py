"""A run SIGKILLed mid-way and rerun ends bit-identical to an uninterrupted run: weights and metrics.

The uninterrupted run (conftest's `straight_run`, shared with test_metrics_on_object_stores.py) and the
killed one are made once; each test resumes its own copy of the killed run's folder."""

import os
import random
import shutil
import signal
import subprocess
import sys

import pytest
from safetensors.torch import load_file
from train_child import STRAIGHT_STEPS

import storage
from marin.training.step_metrics import WALL_CLOCK_FIELDS

CHILD = os.path.join(os.path.dirname(__file__), "train_child.py")
TIMING_FIELDS = WALL_CLOCK_FIELDS


def _run(cache: str, out: str, steps: int, kill_at: int | None = None) -> subprocess.CompletedProcess:
    args = [sys.executable, CHILD, cache, out, str(steps)] + ([str(kill_at)] if kill_at else [])
    return subprocess.run(args, capture_output=True, text=True, timeout=300)


def _deterministic_metrics(out: str) -> list[dict]:
    records = storage.read_records(os.path.join(out, "metrics.jsonl"))
    return [{k: v for k, v in r.items() if k not in TIMING_FIELDS} for r in records]


STEPS = (
    STRAIGHT_STEPS  # straight_run's: the uninterrupted run every resumed run below must end bit-identical to
)


@pytest.fixture(scope="module")
def killed_at_8(story_cache, tmp_path_factory) -> str:
    """The same run, SIGKILLed in step 9 (after step 8's records); each test resumes its own copy."""
    out = str(tmp_path_factory.mktemp("killed") / "run")
    killed = _run(story_cache, out, STEPS, kill_at=8)
    assert killed.returncode == -signal.SIGKILL
    # checkpoints every 3 steps: the kill at 8 lost steps 7 and 8, which the metrics still show
    assert sorted(os.listdir(os.path.join(out, "checkpoints"))) == ["step-00000003", "step-00000006"]
    assert len(_deterministic_metrics(out)) == 8
    return out


def _copy_of(run: str, tmp_path) -> str:
    copy = str(tmp_path / "interrupted")
    shutil.copytree(run, copy)
    return copy


def test_sigkilled_run_resumes_to_bit_identical_weights_and_metrics(
    story_cache, straight_run, killed_at_8, tmp_path
):
    steps = STEPS
    interrupted = _copy_of(killed_at_8, tmp_path)

    resumed = _run(story_cache, interrupted, steps)
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from" in resumed.stdout

    final = "checkpoints/step-00000010/model.safetensors"
    a, b = load_file(os.path.join(straight_run, final)), load_file(os.path.join(interrupted, final))
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].equal(b[name]), name
    ha, hb = (
        load_file(os.path.join(straight_run, "hf/model.safetensors")),
        load_file(os.path.join(interrupted, "hf/model.safetensors")),
    )
    assert all(ha[n].equal(hb[n]) for n in ha)
    opt_a = load_file(os.path.join(straight_run, "checkpoints/step-00000010/optimizer.safetensors"))
    opt_b = load_file(os.path.join(interrupted, "checkpoints/step-00000010/optimizer.safetensors"))
    assert all(opt_a[n].equal(opt_b[n]) for n in opt_a)

    metrics_a, metrics_b = _deterministic_metrics(straight_run), _deterministic_metrics(interrupted)
    assert [m["step"] for m in metrics_b] == list(range(1, steps + 1))
    assert metrics_a == metrics_b
    assert {"eval_loss", "eval_bpb"} <= metrics_a[3].keys()  # steps_per_eval=4: step 4 has eval metrics


def test_corrupted_latest_checkpoint_is_skipped_and_the_run_resumes_from_the_one_before_to_identical_weights(
    story_cache, straight_run, killed_at_8, tmp_path
):
    steps = STEPS
    interrupted = _copy_of(killed_at_8, tmp_path)
    # Flip one byte in the middle of the newest checkpoint's weights: same size, still parses as a header.
    weights = os.path.join(interrupted, "checkpoints/step-00000006/model.safetensors")
    with open(weights, "r+b") as f:
        f.seek(os.path.getsize(weights) // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))

    resumed = _run(story_cache, interrupted, steps)
    assert resumed.returncode == 0, resumed.stderr
    assert (
        f"[marin.train] skipped checkpoint {interrupted}/checkpoints/step-00000006: checkpoint "
        f"{interrupted}/checkpoints/step-00000006/model.safetensors does not match its xxh3_128 checksum"
        in resumed.stdout
    )
    assert f"resumed from {interrupted}/checkpoints/step-00000003" in resumed.stdout
    final = "checkpoints/step-00000010/model.safetensors"
    a, b = load_file(os.path.join(straight_run, final)), load_file(os.path.join(interrupted, final))
    assert a.keys() == b.keys() and all(a[name].equal(b[name]) for name in a)
    assert _deterministic_metrics(straight_run) == _deterministic_metrics(interrupted)


RECIPES_CHILD = os.path.join(os.path.dirname(__file__), "recipes_child.py")


def test_a_run_with_every_recipe_on_killed_at_a_random_step_resumes_bit_identically(
    story_cache, other_cache, tmp_path
):
    """Muon, EMA, z-loss, skipped steps, document masking and a mixture schedule: all of their state
    (Muon's momentum, the EMA, the guard's running mean, the loader's phase) survives a SIGKILL."""
    steps = 6
    kill_at = random.Random().randint(1, steps - 1)  # a different step each run; the message names it

    def run(out: str, kill: int | None = None) -> subprocess.CompletedProcess:
        args = [sys.executable, RECIPES_CHILD, story_cache, other_cache, out, str(steps)]
        return subprocess.run(
            args + ([str(kill)] if kill else []), capture_output=True, text=True, timeout=300
        )

    straight, interrupted = str(tmp_path / "straight"), str(tmp_path / "interrupted")
    assert run(straight).returncode == 0
    killed = run(interrupted, kill_at)
    assert killed.returncode == -signal.SIGKILL, f"kill at {kill_at}: {killed.stderr[-2000:]}"
    assert len(_deterministic_metrics(interrupted)) == kill_at  # it died mid-run, after step kill_at
    resumed = run(interrupted)
    assert resumed.returncode == 0, f"kill at {kill_at}: {resumed.stderr[-2000:]}"
    last = f"checkpoints/step-{steps:08d}"
    for name in ("model", "optimizer", "ema"):
        a = load_file(os.path.join(straight, last, f"{name}.safetensors"))
        b = load_file(os.path.join(interrupted, last, f"{name}.safetensors"))
        assert a.keys() == b.keys() and all(a[k].equal(b[k]) for k in a), f"{name}, kill at {kill_at}"
    assert _deterministic_metrics(straight) == _deterministic_metrics(interrupted), f"kill at {kill_at}"
    records = _deterministic_metrics(straight)
    assert {"z_loss", "domain_tokens", "skipped_steps"} <= records[-1].keys() and records[-1]["ema"] is True
    assert any(
        "momentum_buffer" in k for k in load_file(os.path.join(straight, last, "optimizer.safetensors"))
    )
