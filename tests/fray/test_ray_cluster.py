"""RayCluster on a real two-node Ray cluster (head + worker started by `ray start`)."""

from __future__ import annotations

import functools
import os
import signal
import time
from pathlib import Path

import pytest

from fray.cluster import ResourceConfig, ResourcesUnavailableError
from fray.cluster.ray_cluster import ray_options

pytestmark = pytest.mark.timeout(180)


def _node_and_print(message: str):
    import ray

    print(message)
    return ray.get_runtime_context().get_node_id()


def _fail_and_count(attempts_file: str):
    with open(attempts_file, "a") as f:
        f.write("attempt\n")
    raise ValueError("the task's own bug")


def _hang_on_first_attempt(work_dir: str) -> str:
    """Attempt 1 publishes its pid and blocks until killed; a later attempt completes (once)."""
    work = Path(work_dir)
    attempt = len(list(work.glob("attempt-*.pid"))) + 1
    tmp = work / f"tmp-{attempt}"
    tmp.write_text(str(os.getpid()))
    tmp.rename(work / f"attempt-{attempt}.pid")
    print(f"attempt {attempt} running in pid {os.getpid()}")
    if attempt == 1:
        time.sleep(600)
    with open(work / "completions", "a") as f:
        f.write("done\n")
    return f"done on attempt {attempt}"


def test_concurrent_tasks_each_log_their_own_output(ray_cluster, tmp_path):
    logs = [tmp_path / f"t{i}.log" for i in range(2)]
    slow = ResourceConfig.with_cpu(1)
    futures = [
        ray_cluster.submit(
            functools.partial(_node_and_print, f"hello {i}"), name=f"t{i}", resources=slow, log_path=str(log)
        )
        for i, log in enumerate(logs)
    ]
    nodes = [f.result(timeout=120) for f in futures]
    assert all(nodes)
    for i, log in enumerate(logs):
        text = log.read_text()
        assert f"=== fray: task 't{i}' starting" in text and f"hello {i}" in text
        assert f"hello {1 - i}" not in text


def test_task_exception_is_raised_as_itself_and_not_retried(ray_cluster, tmp_path):
    attempts = tmp_path / "attempts"
    future = ray_cluster.submit(functools.partial(_fail_and_count, str(attempts)), name="buggy")
    with pytest.raises(ValueError, match="the task's own bug"):
        future.result(timeout=120)
    assert attempts.read_text() == "attempt\n"


def test_killed_worker_process_is_retried_and_completes_exactly_once(ray_cluster, tmp_path):
    log = tmp_path / "victim.log"
    future = ray_cluster.submit(
        functools.partial(_hang_on_first_attempt, str(tmp_path)), name="victim", log_path=str(log)
    )
    first = tmp_path / "attempt-1.pid"
    deadline = time.monotonic() + 120
    while not first.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    os.kill(int(first.read_text()), signal.SIGKILL)  # the Ray worker process running the task
    assert future.result(timeout=150) == "done on attempt 2"
    assert (tmp_path / "completions").read_text() == "done\n"
    text = log.read_text()
    assert text.count("=== fray: task 'victim' starting") == 2 and "attempt 2 running" in text


def test_gpu_request_on_a_cpu_only_cluster_fails_at_once(ray_cluster):
    future = ray_cluster.submit(
        lambda: "never runs", name="train", resources=ResourceConfig.with_gpu("auto", 1)
    )
    assert future.done()
    with pytest.raises(
        ResourcesUnavailableError, match=r"task 'train' cannot run on this Ray cluster: it asks for .*GPU=1"
    ):
        future.result()
    too_many_cpus = ray_cluster.submit(lambda: 1, name="wide", resources=ResourceConfig.with_cpu(2))
    with pytest.raises(ResourcesUnavailableError, match="CPU=2 and no node has that"):
        too_many_cpus.result(timeout=1)
    # A gang: the two 1-CPU nodes hold two 1-CPU replicas, not three, and not two on one node.
    three = ray_cluster.submit(lambda: 1, name="multi", resources=ResourceConfig.with_cpu(1, replicas=3))
    with pytest.raises(
        ResourcesUnavailableError,
        match=r"3 replicas of CPU=1 and the whole cluster holds 2 \(per node: 1, 1\)",
    ):
        three.result(timeout=1)
    packed = ray_cluster.submit(
        lambda: 1,
        name="multi",
        resources=ResourceConfig.with_cpu(1, replicas=2, gang_placement="STRICT_PACK"),
    )
    with pytest.raises(
        ResourcesUnavailableError,
        match="on one node \\(gang_placement=STRICT_PACK\\) and the largest node holds 1",
    ):
        packed.result(timeout=1)


def test_ray_options_follow_the_resource_config():
    assert ray_options(ResourceConfig.with_cpu(2, ram="1GiB")) == {"num_cpus": 2.0, "memory": 1024**3}
    gpu = ray_options(ResourceConfig.with_gpu("H100", 8, cpu=16, env_vars={"NCCL_DEBUG": "INFO"}))
    assert gpu == {
        "num_cpus": 16.0,
        "num_gpus": 8,
        "accelerator_type": "H100",
        "runtime_env": {"env_vars": {"NCCL_DEBUG": "INFO"}},
    }
    tpu = ray_options(ResourceConfig.with_tpu("v4-16"))
    assert tpu["accelerator_type"] == "TPU-V4" and tpu["resources"] == {"TPU": 4, "TPU-v4-16-head": 1}
