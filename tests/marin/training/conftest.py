"""Real token caches for the trainer's tests: a BPE tokenizer trained on the embedded corpus, and caches
written by the real `tokenized()` step (run by the StepRunner, zephyr in-process)."""

from __future__ import annotations

import os
import sys

import pytest

from marin.data.corpus import SOURCE_NAME, stories
from marin.data.tokenizer_training import train_byte_level_bpe
from marin.execution.step_runner import StepRunner
from marin.experiment.data import tokenized
from zephyr import ZephyrConfig

sys.path.insert(0, os.path.dirname(__file__))  # the tests import train_child's shared configuration

VOCAB = 384
IN_PROCESS = ZephyrConfig(backend="sync")


@pytest.fixture(scope="session")
def bpe_tokenizer(tmp_path_factory) -> str:
    """A byte-level BPE trained on 300 stories of the embedded corpus."""
    folder = str(tmp_path_factory.mktemp("tokenizer"))
    train_byte_level_bpe(stories(0, 300), VOCAB, folder)
    return folder


def tokenize(prefix: str, name: str, tokenizer: str, **source) -> str:
    """Run a `tokenized()` step under `prefix` and return its output folder (the token cache)."""
    handle = tokenized(name, tokenizer=tokenizer, zephyr=IN_PROCESS, **source)
    result = StepRunner(prefix=prefix, progress=False).run([handle])
    (path,) = result.outcomes
    return path


@pytest.fixture(scope="session")
def story_cache(tmp_path_factory, bpe_tokenizer) -> str:
    """About 400 training and 40 validation stories of the embedded corpus."""
    prefix = str(tmp_path_factory.mktemp("caches"))
    return tokenize(
        prefix,
        "tokenized/stories",
        bpe_tokenizer,
        source=SOURCE_NAME,
        sample_count=440,
        validation_fraction=0.1,
    )


@pytest.fixture(scope="session")
def other_cache(tmp_path_factory, bpe_tokenizer) -> str:
    """A second, different cache (plain-text files of other stories) for mixtures."""
    folder = tmp_path_factory.mktemp("other")
    for i, text in enumerate(stories(5000, 5200)):
        (folder / f"story-{i:03d}.txt").write_text(text)
    return tokenize(
        str(folder / "out"),
        "tokenized/other",
        bpe_tokenizer,
        paths=[str(folder / "*.txt")],
        validation_fraction=0.1,
    )


@pytest.fixture(scope="session")
def empty_cache(tmp_path_factory, bpe_tokenizer) -> str:
    """A token cache with no documents (its source file is empty)."""
    folder = tmp_path_factory.mktemp("empty")
    (folder / "empty.jsonl").write_text("")
    return tokenize(
        str(folder / "out"),
        "tokenized/empty",
        bpe_tokenizer,
        paths=[str(folder / "empty.jsonl")],
        allow_empty=True,  # an empty source is an error unless asked for; the trainer must refuse it too
    )


@pytest.fixture(scope="session")
def single_run(story_cache, tmp_path_factory) -> str:
    """One process trained GANG_STEPS steps of `tiny_config` (no checkpoints): the run every
    gang test (DDP, FSDP, multihost, resharded resumes) must match, step for step."""
    from train_child import GANG_STEPS, tiny_config

    from marin.training.datasets import DatasetInput
    from marin.training.launch import run_job
    from marin.training.trainer import TrainJob

    out = str(tmp_path_factory.mktemp("single") / "run")
    config = tiny_config(GANG_STEPS, checkpoint_every=None)
    summary = run_job(TrainJob(config, (DatasetInput("stories", story_cache, 1.0),), out), num_processes=1)
    assert summary["world_size"] == 1
    return out


@pytest.fixture(scope="session")
def straight_run(story_cache, tmp_path_factory) -> str:
    """`train_child.py CACHE OUT 10` run to the end in its own process: the uninterrupted run that the
    SIGKILLed-and-resumed runs of test_resume.py and test_metrics_on_object_stores.py must reproduce."""
    import subprocess

    from train_child import STRAIGHT_STEPS

    out = str(tmp_path_factory.mktemp("straight") / "run")
    child = os.path.join(os.path.dirname(__file__), "train_child.py")
    done = subprocess.run(
        [sys.executable, child, story_cache, out, str(STRAIGHT_STEPS)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return out
