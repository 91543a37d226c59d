"""A training step with replicas=2 runs as a two-process DDP (or FSDP) gang: on Ray (a head and two
worker nodes, one replica on each worker) and on a LocalCluster, matching a single-process run of the
same global batch; so does gradient accumulation over microbatches."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import re
import shutil
import signal
import time
from pathlib import Path

import pytest
from train_child import GANG_STEPS, FailAfterStep, SleepEachStep, Stop, tiny_config

import storage
from fray.cluster import LocalCluster, ResourceConfig
from marin.training.datasets import DatasetInput
from marin.training.errors import TrainingConfigError
from marin.training.launch import run_job
from marin.training.trainer import TrainJob

# One worker runs this module's tests in order: they share its Ray cluster, which the last two shrink.
pytestmark = [pytest.mark.timeout(600), pytest.mark.xdist_group("multihost"), pytest.mark.call_limit(150)]
STEPS = GANG_STEPS  # as single_run's (conftest.py)


def _metrics(out) -> list[dict]:
    return storage.read_records(os.path.join(out, "metrics.jsonl"))


def _assert_same_run(single: str, other: str, world_size: int = 2, grad_accum_steps: int = 1) -> None:
    a, b = _metrics(single), _metrics(other)
    assert len(a) == len(b) == STEPS
    for ra, rb in zip(a, b, strict=False):
        assert ra["loss"] == pytest.approx(rb["loss"], rel=1e-5), ra["step"]
    assert {r["world_size"] for r in a} == {1} and {r["world_size"] for r in b} == {world_size}
    assert {(r["grad_accum_steps"]) for r in b} == {grad_accum_steps}


def _gang_task(story_cache: str, out: str, **overrides):
    config = tiny_config(STEPS, checkpoint_every=None, **overrides)
    return functools.partial(run_job, TrainJob(config, (DatasetInput("stories", story_cache, 1.0),), out), 1)


# On LocalClusters first: the Ray tests below share a cluster, started for the first of them.


def test_two_replicas_of_two_processes_form_one_group_of_four(story_cache, single_run, tmp_path):
    cluster = LocalCluster(cpu=2)
    try:
        out = str(tmp_path / "gang")
        job = TrainJob(
            tiny_config(STEPS, checkpoint_every=None), (DatasetInput("stories", story_cache, 1.0),), out
        )
        future = cluster.submit(
            functools.partial(run_job, job, 2),
            name="train-gang",
            resources=ResourceConfig.with_cpu(1, replicas=2),
        )
        assert future.result(timeout=540)["world_size"] == 4
        _assert_same_run(single_run, out, world_size=4)
    finally:
        cluster.shutdown()


def test_grad_accumulation_over_microbatches_matches_the_whole_batch(story_cache, single_run, tmp_path):
    out = str(tmp_path / "accum")
    config = tiny_config(STEPS, checkpoint_every=None, grad_accum_steps=4)
    summary = run_job(TrainJob(config, (DatasetInput("stories", story_cache, 1.0),), out), num_processes=1)
    assert (summary["world_size"], summary["grad_accum_steps"]) == (1, 4)
    _assert_same_run(single_run, out, world_size=1, grad_accum_steps=4)
    with pytest.raises(TrainingConfigError, match="grad_accum_steps=3 does not split this process's 4 rows"):
        run_job(
            TrainJob(
                tiny_config(2, grad_accum_steps=3),
                (DatasetInput("stories", story_cache, 1.0),),
                str(tmp_path / "bad"),
            ),
            num_processes=1,
        )


@pytest.fixture(scope="module")
def gang_stopped_after_9(story_cache, tmp_path_factory) -> str:
    """A 2-replica DDP gang on a LocalCluster, each replica accumulating 2 microbatches of 1 row
    (batch_size 4 = 2 replicas x 2 x 1), checkpointing every 3 steps, stopped on purpose after step 9:
    its 9 steps match one process, and its checkpoint resumes at world size 1 (the two tests below)."""
    out = str(tmp_path_factory.mktemp("stopped") / "run")
    config = tiny_config(STEPS, checkpoint_every=3, grad_accum_steps=2, callbacks=(FailAfterStep(9),))
    cluster = LocalCluster(cpu=2)
    try:
        future = cluster.submit(
            functools.partial(
                run_job, TrainJob(config, (DatasetInput("stories", story_cache, 1.0),), out), 1
            ),
            name="train-gang",
            resources=ResourceConfig.with_cpu(1, replicas=2),
            log_path=out + ".log",
        )
        with pytest.raises(Stop):
            future.result(timeout=540)
    finally:
        cluster.shutdown()
    return out


def test_two_replica_ddp_with_grad_accumulation_on_a_local_cluster_matches_one_process(
    gang_stopped_after_9, single_run
):
    rows = _metrics(gang_stopped_after_9)
    assert [(r["world_size"], r["grad_accum_steps"]) for r in rows] == [(2, 2)] * 9
    for ra, rb in zip(_metrics(single_run)[:9], rows, strict=True):
        assert ra["loss"] == pytest.approx(rb["loss"], rel=1e-5), ra["step"]


def test_a_checkpoint_written_by_two_replicas_resumes_at_world_size_one(
    gang_stopped_after_9, story_cache, single_run, tmp_path
):
    out = str(tmp_path / "run")
    shutil.copytree(gang_stopped_after_9, out)
    config = tiny_config(STEPS, checkpoint_every=3, grad_accum_steps=2)
    summary = run_job(TrainJob(config, (DatasetInput("stories", story_cache, 1.0),), out), num_processes=1)
    assert summary["resumed_from_step"] == 9 and summary["world_size"] == 1  # world size 1 now
    rows = _metrics(out)
    assert [r["world_size"] for r in rows] == [2] * 9 + [1] * (STEPS - 9)
    assert {r["grad_accum_steps"] for r in rows} == {2}  # 2 microbatches of 1 row, then of 2 rows
    for ra, rb in zip(_metrics(single_run), rows, strict=True):
        assert ra["loss"] == pytest.approx(rb["loss"], rel=1e-5), ra["step"]


# On Ray: the module's cluster lives from the first of these tests to the last.


@pytest.fixture(scope="module")
def two_workers():
    """A Ray cluster of a head with no CPUs and two 1-CPU worker nodes (`ray start`), this process
    connected to it: a 2-replica gang of 1 CPU each can only run as one replica on each worker.
    Shared by this module's Ray tests (the preemption tests, the last, add a node and kill two);
    the process is disconnected from it afterwards."""
    import ray
    from ray_nodes import LocalRayCluster

    from rayconnect import connect

    if ray.is_initialized():
        ray.shutdown()
    nodes = LocalRayCluster(workers=2, cpus_per_node=1, head_cpus=0).start()
    try:
        connect(nodes.address)
        yield nodes
    finally:
        nodes.stop()  # disconnects this process first


def _noting_the_node(folder: str, task):
    """Run `task` in a replica, first writing its Ray node's id to FOLDER/node.rankR."""
    import ray

    Path(folder, f"node.rank{os.environ['RANK']}").write_text(ray.get_runtime_context().get_node_id())
    return task()


def _worker_node_ids() -> set[str]:
    import ray

    return {n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) > 0}


def _gang_on_two_workers(task, tmp_path, name: str) -> dict:
    """Run `task` as a 2-replica gang on `two_workers`; its summary, once both replicas ran on the two
    different worker nodes (never the head)."""
    from fray.cluster import RayCluster

    future = RayCluster(max_retries=0).submit(
        functools.partial(_noting_the_node, str(tmp_path), task),
        name=name,
        resources=ResourceConfig.with_cpu(1, replicas=2),
        log_path=str(tmp_path / "log"),
    )
    summary = future.result(timeout=540)
    nodes = [(tmp_path / f"node.rank{rank}").read_text() for rank in (0, 1)]
    assert len(set(nodes)) == 2 and set(nodes) == _worker_node_ids(), nodes
    return summary


def test_two_replica_ddp_on_two_ray_nodes_matches_one_process(two_workers, story_cache, single_run, tmp_path):
    out = str(tmp_path / "gang")
    summary = _gang_on_two_workers(_gang_task(story_cache, out), tmp_path, "train-gang")
    assert (summary["world_size"], summary["parallelism"]) == (2, "ddp")
    _assert_same_run(single_run, out)
    assert os.path.exists(os.path.join(out, "hf", "model.safetensors"))  # rank 0 exported


@pytest.mark.slow  # FSDP gangs run on a LocalCluster in test_fsdp.py, and DDP gangs on Ray above
def test_two_replica_fsdp_on_two_ray_nodes_matches_one_process(
    two_workers, story_cache, single_run, tmp_path
):
    out = str(tmp_path / "gang")
    summary = _gang_on_two_workers(_gang_task(story_cache, out, parallelism="fsdp"), tmp_path, "train-fsdp")
    assert (summary["world_size"], summary["parallelism"]) == (2, "fsdp")
    _assert_same_run(single_run, out)
    assert os.path.exists(os.path.join(out, "hf", "model.safetensors"))  # rank 0 exported


def _rank1_pid(log: str) -> int | None:
    try:
        text = open(log).read()
    except FileNotFoundError:
        return None
    found = re.findall(r"=== fray: task 'train-gang' starting on \S+ pid (\d+)", text)
    return int(found[-1]) if found else None


def test_a_lost_replica_restarts_the_whole_gang_which_resumes_from_its_checkpoint(
    two_workers, story_cache, single_run, tmp_path
):
    from fray.cluster import RayCluster

    cluster = RayCluster(max_retries=2)
    out, log = tmp_path / "gang", tmp_path / "log"
    config = tiny_config(STEPS, checkpoint_every=3)
    config = dataclasses.replace(config, callbacks=(SleepEachStep(0.4),))  # room to kill a replica mid-run
    job = TrainJob(config, (DatasetInput("stories", story_cache, 1.0),), str(out))
    future = cluster.submit(
        functools.partial(run_job, job, 1),
        name="train-gang",
        resources=ResourceConfig.with_cpu(1, replicas=2),
        log_path=str(log),
    )
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline and not future.done():
        if (out / "checkpoints" / "step-00000006").exists() and _rank1_pid(f"{log}.rank1"):
            break
        time.sleep(0.2)
    assert not future.done(), future.exception()
    os.kill(_rank1_pid(f"{log}.rank1"), signal.SIGKILL)  # as a preempted node's worker dies
    summary = future.result(timeout=500)
    assert summary["resumed_from_step"] >= 6
    assert open(log).read().count("lost a replica") == 1
    _assert_same_run(single_run, str(out))  # the resumed run computed what an uninterrupted one does


PREEMPTED_DRIVER = """
import functools, json, sys, time
sys.path.insert(0, sys.argv[5])
from train_child import SleepEachStep, tiny_config
from fray.cluster import RayCluster, ResourceConfig
from marin.training.datasets import DatasetInput
from marin.training.launch import run_job
from marin.training.trainer import TrainJob

address, cache, out, log = sys.argv[1:5]
elastic = sys.argv[6] == "elastic"
if elastic:  # the node is gone for good here: the shrink need not wait the default 20 s (ELASTIC_WAIT_S) for it
    import fray.cluster.ray_gang
    fray.cluster.ray_gang.ELASTIC_WAIT_S = 4.0
cluster = RayCluster(address=address, max_retries=2)
config = tiny_config(20, checkpoint_every=3, callbacks=(SleepEachStep(0.4),))
job = TrainJob(config, (DatasetInput("stories", cache, 1.0),), out)
future = cluster.submit(functools.partial(run_job, job, 1), name="train-gang",
                        resources=ResourceConfig.with_cpu(1, replicas=2, elastic=elastic), log_path=log)
print(json.dumps(future.result(timeout=600)))
"""


def _newest_checkpoint(out: Path) -> int:
    return max(int(p.name.split("-")[1]) for p in (out / "checkpoints").glob("step-*"))


def _preempt_a_node_mid_training(
    nodes, story_cache: str, tmp_path, elastic: bool
) -> tuple[dict, str, str, int]:
    """Train a 2-replica gang on `nodes` (a head with no CPUs and 1-CPU workers); kill the raylet of
    rank 1's node, and every process under it, after the step-6 checkpoint. Returns the step's
    summary, its output folder, its log and the newest checkpoint's step when the node was killed."""
    import subprocess
    import sys

    import psutil

    out, log = tmp_path / "run", tmp_path / "log"
    driver = subprocess.Popen(
        [
            sys.executable,
            "-c",
            PREEMPTED_DRIVER,
            nodes.address,
            story_cache,
            str(out),
            str(log),
            os.path.dirname(__file__),
            "elastic" if elastic else "fixed",
        ],
        env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline and driver.poll() is None:
            if (out / "checkpoints" / "step-00000006").exists() and _rank1_pid(f"{log}.rank1"):
                break
            time.sleep(0.2)
        assert driver.poll() is None, driver.communicate()
        replica = psutil.Process(_rank1_pid(f"{log}.rank1"))
        [raylet] = [p for p in replica.parents() if p.name() == "raylet"]
        # The node goes with everything on it, as a preempted VM does. A raylet killed alone leaves
        # its workers to notice in their own time, and rank 1 trained on with rank 0 for a few more
        # checkpoints (a CI run resumed from step 12 with the node "lost" at step 6).
        node = [raylet, *raylet.children(recursive=True)]
        newest = _newest_checkpoint(out)
        for proc in node:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        stdout, stderr = driver.communicate(timeout=500)
        assert driver.returncode == 0, stderr[-5000:]
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    # Ray also prints its own notices (a node died) to the driver's stdout: the summary is the JSON line.
    [summary] = [json.loads(line) for line in stdout.splitlines() if line.startswith('{"')]
    return summary, str(out), open(log).read(), newest


@pytest.mark.slow  # a second preemption on the cluster: the lost replica (above) covers the retry
def test_killing_a_worker_nodes_raylet_mid_training_retries_the_gang_which_completes_once(
    two_workers, story_cache, single_run, tmp_path
):
    """With a third worker added, a fixed gang that loses a node is retried on the two left and
    completes once (runs before the elastic test, which then finds two workers)."""
    two_workers.add_workers(1)
    summary, out, log, newest = _preempt_a_node_mid_training(
        two_workers, story_cache, tmp_path, elastic=False
    )
    # The newest checkpoint there was when the node died, or the one rank 0 was already saving then:
    # it needs no peer to finish a save (checkpoints come every 3 steps).
    assert summary["resumed_from_step"] in (newest, newest + 3), (summary, newest)
    assert summary["world_size"] == 2
    assert log.count("lost a replica") == 1  # retried once, completed once
    _assert_same_run(single_run, out)


def test_an_elastic_gang_that_lost_a_node_for_good_completes_at_world_size_one(
    two_workers, story_cache, single_run, tmp_path
):
    """On the module's cluster, down to two workers: an elastic gang that loses one has no node to
    replace it and completes at world size 1. The module's last test: it leaves one worker."""
    summary, out, log, newest = _preempt_a_node_mid_training(two_workers, story_cache, tmp_path, elastic=True)
    assert summary["resumed_from_step"] in (newest, newest + 3) and summary["world_size"] == 1
    assert log.count("lost a replica") == 1 and "elastic: continuing with 1" in log
    sizes = [r["world_size"] for r in _metrics(out)]
    resumed = summary["resumed_from_step"]
    assert sizes == [2] * resumed + [1] * (STEPS - resumed)
    for ra, rb in zip(_metrics(single_run), _metrics(out), strict=True):  # the same global batches
        assert ra["loss"] == pytest.approx(rb["loss"], rel=1e-5), ra["step"]
