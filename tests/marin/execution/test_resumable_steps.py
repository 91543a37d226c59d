"""Resumable steps through the runner: a StepRunner killed mid-step, then rerun, keeps what the killed
attempt finished (train_lm's checkpoints, tokenized()'s shards) and ends with the bytes of a clean run."""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from safetensors.torch import load_file

from marin.data.corpus import stories
from marin.data.tokenizer_training import train_byte_level_bpe

# The experiment, run as its own process:
# `python script.py PREFIX TOKENIZER DATA_DIR (tokenize|train|plan) TRAIN_STEPS`.
SCRIPT = textwrap.dedent("""
    import json, os, sys
    from marin.execution.step_runner import StepRunner
    from marin.experiment.data import tokenized
    from marin.experiment.train import train_lm
    from marin.training.models import LlamaConfig
    from marin.training.optim import AdamConfig
    from marin.training.schedules import Cosine
    from zephyr import ZephyrConfig

    prefix, tokenizer, data, what, train_steps = sys.argv[1:6]
    files = [os.path.join(data, f"part-{i}.jsonl") for i in range(4)]
    tokens = tokenized("tokenized/stories", tokenizer=tokenizer, paths=files, validation_fraction=0.1,
                       zephyr=ZephyrConfig(backend="sync"))  # one shard after another, in the step's process
    model = train_lm(
        "train/nano",
        model=LlamaConfig(hidden_dim=32, intermediate_dim=64, num_layers=2, num_heads=4,
                          num_kv_heads=2, max_seq_len=64),
        optimizer=AdamConfig(learning_rate=3e-3, schedule=Cosine(warmup=2)),
        datasets={tokens: 1.0}, batch_size=4, seq_len=32, num_train_steps=int(train_steps), checkpoint_every=2,
        keep_last_k=2, cpu_threads=1, seed=3,
    )
    runner = StepRunner(prefix=prefix, progress=False)
    if what == "plan":
        print(json.dumps(runner.plan([model]).to_json()))
    else:
        runner.run([tokens] if what == "tokenize" else [model])
""")
# Enough steps after the fifth (where the test freezes the run) that the kill lands mid-run, which
# the test checks before it trusts the outcome.
TRAIN_STEPS = 60


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    root = tmp_path_factory.mktemp("resumable")
    script = root / "experiment.py"
    script.write_text(SCRIPT)
    tokenizer = root / "tokenizer"
    train_byte_level_bpe(stories(0, 300), 384, str(tokenizer))
    data = root / "data"
    data.mkdir()
    for i in range(4):
        write_stories(data / f"part-{i}.jsonl", i)

    def start(prefix, what, new_session=False, data_dir=None):
        return subprocess.Popen(
            [
                sys.executable,
                str(script),
                str(prefix),
                str(tokenizer),
                str(data_dir or data),
                what,
                str(TRAIN_STEPS),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=new_session,
        )

    return start, data


def write_stories(path: Path, i: int) -> None:
    path.write_text("".join(json.dumps({"text": s}) + "\n" for s in stories(i * 100, i * 100 + 100)))


def finish(proc, timeout=300):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return out


def wait_for(condition, proc, what, timeout=120):
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"the runner ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.01)


def only(folder: Path, pattern: str) -> Path:
    (match,) = folder.glob(pattern)
    return match


def cache_files(out: Path) -> dict[str, bytes]:
    """The token cache's own files (not the runner's records or the step's log)."""
    return {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and not p.name.startswith((".executor", ".artifact"))
    }


def test_killed_tokenize_step_keeps_its_finished_shards_and_ends_with_clean_bytes(experiment, tmp_path):
    start, shared_data = experiment
    # The input files are part of the step's key, so they must be the same bytes in every run below:
    # the third shard is made large instead, so the step is still on it long after shards 0 and 1
    # are done and the test has killed the runner (it polls every 10 ms).
    data = tmp_path / "data"
    shutil.copytree(shared_data, data)
    story_lines = (data / "part-2.jsonl").read_text()
    (data / "part-2.jsonl").write_text(story_lines * 400)
    prefix = tmp_path / "killed"
    runner = start(prefix, "tokenize", data_dir=data)
    records = lambda: list(prefix.glob("tokenized/stories-*/shards/part-*.json"))  # noqa: E731
    wait_for(lambda: len(records()) == 2, runner, "two finished shards")
    workers = psutil.Process(runner.pid).children()
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    psutil.wait_procs(workers, timeout=30)  # the step's process follows its runner
    out = only(prefix / "tokenized", "stories-*")
    assert json.loads((out / ".executor_status").read_text())["state"] == "RUNNING"
    finished = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in out.glob("*/part-0000[01].*")}
    assert len(finished) == 14  # shards 0 and 1: tokens, offsets, bytes of both splits, and their records

    finish(start(prefix, "tokenize", data_dir=data))
    assert {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in finished} == finished  # kept, not rewritten
    artifact = json.loads((out / ".artifact.json").read_text())["result"]
    assert artifact["shards_resumed"] == 2

    finish(start(tmp_path / "clean", "tokenize", data_dir=data))
    clean = only(tmp_path / "clean" / "tokenized", "stories-*")
    assert clean.name == out.name
    assert cache_files(out) == cache_files(clean)


@pytest.mark.call_limit(120)
def test_killed_train_lm_resumes_from_its_latest_checkpoint_to_the_weights_of_an_uninterrupted_run(
    experiment, tmp_path
):
    start, _ = experiment
    prefix = tmp_path / "killed"
    runner = start(prefix, "train", new_session=True)
    metrics = lambda: list(prefix.glob("train/nano-*/metrics.jsonl"))  # noqa: E731
    wait_for(
        lambda: metrics() and len(metrics()[0].read_text().splitlines()) >= 5, runner, "five training steps"
    )
    os.killpg(runner.pid, signal.SIGSTOP)  # freeze the runner and its step's process where they are...
    out = only(prefix / "train", "nano-*")
    assert len((out / "metrics.jsonl").read_text().splitlines()) < TRAIN_STEPS  # ...mid-run
    os.killpg(runner.pid, signal.SIGKILL)  # then kill them, as a preemption would
    runner.wait()
    checkpoints = sorted(os.listdir(out / "checkpoints"))
    assert checkpoints and json.loads((out / ".executor_status").read_text())["state"] == "RUNNING"

    planned = {s["name"]: s for s in json.loads(finish(start(prefix, "plan")))["steps"]}
    newest = int(checkpoints[-1].split("-")[1])
    assert planned["train/nano"]["state"] == "run: retry"
    assert planned["train/nano"]["reason"].endswith(f"; resumes from step {newest}")

    finish(start(prefix, "train"))
    result = json.loads((out / ".artifact.json").read_text())["result"]
    assert 0 < result["resumed_from_step"] < TRAIN_STEPS
    assert result["resumed_from_step"] >= int(checkpoints[-1].split("-")[1])

    finish(start(tmp_path / "straight", "train"))
    straight = only(tmp_path / "straight" / "train", "nano-*")
    assert json.loads((straight / ".artifact.json").read_text())["result"]["resumed_from_step"] == 0
    a, b = load_file(straight / "hf" / "model.safetensors"), load_file(out / "hf" / "model.safetensors")
    assert a.keys() == b.keys() and all(a[name].equal(b[name]) for name in a)
