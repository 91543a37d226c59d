"""Two-process CPU DDP (gloo) trains the same model as one process, within float tolerance."""

import os
import pickle
import re
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest
import torch
from safetensors.torch import load_file
from train_child import tiny_config

import storage
from marin.data.token_cache import TokenCacheError
from marin.training.datasets import DatasetInput
from marin.training.launch import run_job
from marin.training.trainer import TrainJob


def _metrics(out: str) -> list[dict]:
    return storage.read_records(os.path.join(out, "metrics.jsonl"))


STEPS = 6


@pytest.fixture(scope="module")
def two_process_run(story_cache, tmp_path_factory) -> tuple[dict, str]:
    """A run of STEPS steps on marin's launcher with two processes (its summary and output folder):
    what one process and plain torchrun must each match (the two tests below)."""
    out = str(tmp_path_factory.mktemp("ddp") / "run")
    config = tiny_config(STEPS, checkpoint_every=None)
    return run_job(TrainJob(config, (DatasetInput("stories", story_cache, 1.0),), out), num_processes=2), out


def test_two_process_gloo_ddp_matches_single_process(story_cache, two_process_run, tmp_path):
    datasets = (DatasetInput("stories", story_cache, 1.0),)
    config = tiny_config(STEPS, checkpoint_every=None)
    single = run_job(TrainJob(config, datasets, str(tmp_path / "single")), num_processes=1)
    double, ddp = two_process_run

    assert single["num_train_steps"] == double["num_train_steps"] == STEPS
    a = load_file(str(tmp_path / "single/hf/model.safetensors"))
    b = load_file(os.path.join(ddp, "hf", "model.safetensors"))
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-4, atol=1e-5, msg=name)
    # the two ranks each saw half of the same global batches: losses agree step by step
    la, lb = _metrics(str(tmp_path / "single")), _metrics(ddp)
    assert len(la) == len(lb) == STEPS
    for ra, rb in zip(la, lb, strict=False):
        assert ra["loss"] == pytest.approx(rb["loss"], rel=1e-5)
        assert ra["grad_norm"] == pytest.approx(rb["grad_norm"], rel=1e-4)
    assert la[-1]["eval_loss"] == pytest.approx(lb[-1]["eval_loss"], rel=1e-5)


TORCHRUN_WORKER = "import pickle, sys; from marin.training.trainer import train; train(pickle.loads(open(sys.argv[1], 'rb').read()))"  # noqa: E501


def test_train_under_plain_torchrun_matches_marins_launcher(story_cache, two_process_run, tmp_path):
    # torchrun's agent already serves the group's store at MASTER_ADDR:MASTER_PORT; rank 0 must join
    # it as a client rather than bind that port again.
    datasets = (DatasetInput("stories", story_cache, 1.0),)
    ours, ours_out = two_process_run
    job_file = tmp_path / "job.pkl"
    config = tiny_config(STEPS, checkpoint_every=None)
    job_file.write_bytes(pickle.dumps(TrainJob(config, datasets, str(tmp_path / "torchrun"))))
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    worker = ["--no-python", sys.executable, "-c", TORCHRUN_WORKER, str(job_file)]
    done = subprocess.run([*torchrun, *worker], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]

    theirs = _metrics(str(tmp_path / "torchrun"))
    assert ours["num_train_steps"] == len(theirs) == STEPS
    assert {row["world_size"] for row in theirs} == {2}
    for ra, rb in zip(_metrics(ours_out), theirs, strict=True):
        assert ra["loss"] == pytest.approx(rb["loss"], rel=1e-5)


def test_a_failing_process_stops_the_run_with_its_own_error_naming_its_rank(tmp_path):
    missing = DatasetInput("missing", str(tmp_path / "no-cache"), 1.0)
    with pytest.raises(TokenCacheError, match="no-cache") as raised:
        run_job(TrainJob(tiny_config(2), (missing,), str(tmp_path / "out")), num_processes=2)
    assert any(
        re.fullmatch(r"replica rank [01] of 2 failed; the other replicas were stopped", note)
        for note in raised.value.__notes__
    ), raised.value.__notes__


LAUNCHER = textwrap.dedent("""
    import sys
    from marin.training.datasets import DatasetInput
    from marin.training.launch import run_job
    from marin.training.trainer import TrainJob
    from train_child import tiny_config

    cache, out = sys.argv[1], sys.argv[2]
    config = tiny_config(100_000, checkpoint_every=None, steps_per_eval=None)
    run_job(TrainJob(config, (DatasetInput("stories", cache, 1.0),), out), num_processes=2)
""")


def test_rank_processes_die_when_their_launcher_is_killed(story_cache, tmp_path):
    out = tmp_path / "out"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")]),
    }
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, story_cache, str(out)], env=env)
    ranks: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 180  # a bound on waiting for training to start, not a measurement
        metrics = out / "metrics.jsonl"
        while not (metrics.exists() and metrics.read_text().count("\n") >= 2):
            assert launcher.poll() is None, "the launcher exited before training started"
            assert time.monotonic() < deadline, "training never started"
            time.sleep(0.2)
        ranks = psutil.Process(launcher.pid).children()
        assert len(ranks) == 2
        launcher.send_signal(signal.SIGKILL)  # as an OOM kill or a dying worker would: no cleanup runs
        launcher.wait()
        _, alive = psutil.wait_procs(ranks, timeout=60)
        assert alive == [], f"rank processes outlived their launcher: {[p.pid for p in alive]}"
    finally:
        if launcher.poll() is None:
            launcher.kill()
        for rank in ranks:  # without the guarantee these would train on forever
            try:
                rank.kill()
            except psutil.NoSuchProcess:
                pass
