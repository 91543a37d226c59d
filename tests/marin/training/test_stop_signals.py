"""SIGINT / SIGTERM while training: the step under way finishes, a checkpoint is written, the process
exits, and a rerun resumes from that checkpoint to the weights of an uninterrupted run; a second
signal exits at once. The plan's word on a rerun is read from the checkpoints that are there."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

from safetensors.torch import load_file
from train_child import tiny_config

from marin.training.checkpoint import resume_note
from marin.training.datasets import DatasetInput
from marin.training.stop_signals import StopSignals
from marin.training.trainer import TrainJob, train

HERE = os.path.dirname(__file__)
# 200 steps with the default checkpoint settings (every 10 minutes; none by step count); argv: cache, out, sleep
CHILD = """
import sys
sys.path.insert(0, sys.argv[4])
from train_child import SleepEachStep, tiny_config
from marin.training.datasets import DatasetInput
from marin.training.trainer import TrainJob, train
sleep = float(sys.argv[3])
callbacks = (SleepEachStep(sleep),) if sleep else ()
config = tiny_config(200, checkpoint_every=None, steps_per_eval=None, callbacks=callbacks)
train(TrainJob(config, (DatasetInput("stories", sys.argv[1], 1.0),), sys.argv[2]))
"""


def _start(cache: str, out: str, sleep: float = 0.0) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, cache, out, str(sleep), HERE],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _steps_logged(out: str) -> int:
    try:
        with open(os.path.join(out, "metrics.jsonl")) as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def _wait_for(condition, child: subprocess.Popen, what: str, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert child.poll() is None, f"the run ended before {what}: {child.communicate()[1][-2000:]}"
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.01)


def test_sigint_at_a_random_step_checkpoints_and_a_rerun_ends_as_the_uninterrupted_run(story_cache, tmp_path):
    at = random.Random().randrange(10, 190)
    straight, stopped = str(tmp_path / "straight"), str(tmp_path / "stopped")
    assert resume_note(stopped) == "restarts: no checkpoint"
    child = _start(story_cache, stopped)
    _wait_for(lambda: _steps_logged(stopped) >= at, child, f"step {at}")
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 1, err[-2000:]  # it ended by raising, not by the signal
    assert "got SIGINT: finishing this step, then writing a checkpoint" in out
    assert (
        "TrainingInterrupted: training stopped by SIGINT after step" in err
        and "a rerun resumes from it" in err
    )
    (checkpoint,) = os.listdir(os.path.join(stopped, "checkpoints"))  # the interrupt's, nothing by time yet
    step = int(checkpoint.split("-")[1])
    assert at <= step < 200 and _steps_logged(stopped) == step, (at, step)
    assert resume_note(stopped) == f"resumes from step {step}"

    datasets = (DatasetInput("stories", story_cache, 1.0),)
    config = tiny_config(200, checkpoint_every=None, steps_per_eval=None)
    resumed = train(TrainJob(config, datasets, stopped))
    train(TrainJob(config, datasets, straight))
    assert resumed["resumed_from_step"] == step, f"SIGINT after step {at}"
    a = load_file(os.path.join(straight, "hf", "model.safetensors"))
    b = load_file(os.path.join(stopped, "hf", "model.safetensors"))
    assert a.keys() == b.keys() and all(a[n].equal(b[n]) for n in a), f"SIGINT after step {at}"


def test_a_second_signal_exits_at_once_without_waiting_for_the_checkpoint(story_cache, tmp_path):
    out = str(tmp_path / "run")
    child = _start(story_cache, out, sleep=1.0)  # a slow step: the second signal lands inside it
    _wait_for(lambda: _steps_logged(out) >= 2, child, "step 2")
    child.send_signal(signal.SIGTERM)
    _wait_for(lambda: os.path.exists(os.path.join(out, "metrics.jsonl")), child, "metrics")
    time.sleep(0.3)
    child.send_signal(signal.SIGTERM)
    started = time.monotonic()
    child.communicate(timeout=60)
    assert child.returncode == -signal.SIGTERM and time.monotonic() - started < 5
    assert not os.path.exists(os.path.join(out, "checkpoints")) or not os.listdir(
        os.path.join(out, "checkpoints")
    )


def test_the_plan_note_skips_a_checkpoint_with_a_missing_or_short_file(tmp_path):
    out = tmp_path / "run"
    for step, files in ((3, {"model.safetensors": b"12345"}), (6, {"model.safetensors": b"123"})):
        folder = out / "checkpoints" / f"step-{step:08d}"
        folder.mkdir(parents=True)
        names = ["model.safetensors", "optimizer.safetensors", "state.json"]
        (folder / "checksums.json").write_text(json.dumps({n: {"size": 5, "xxh3_128": "x"} for n in names}))
        for name in names:
            (folder / name).write_bytes(files.get(name, b"abcde"))
    assert resume_note(str(out)) == "resumes from step 3"  # step 6's weights are shorter than written
    (out / "checkpoints" / "step-00000003" / "state.json").unlink()
    assert resume_note(str(out)) == "restarts: no checkpoint"


def test_a_sigterm_after_a_sigint_is_only_noted():
    # Ctrl-C reaches a LocalCluster step's process and its runner; the runner's cancel then sends SIGTERM:
    # the checkpoint must still be written, so that SIGTERM does not end the process.
    with StopSignals() as stop:
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        assert stop.received == "SIGINT"
