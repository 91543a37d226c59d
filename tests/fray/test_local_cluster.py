"""LocalCluster: tasks run in other processes (warm workers), within the machine's cores, memory and GPUs."""

from __future__ import annotations

import functools
import os
import signal
import time
from pathlib import Path

import fsspec
import pytest

from fray.cluster import LocalCluster, ResourceConfig, ResourcesUnavailableError, TaskLostError


@pytest.fixture
def cluster():
    c = LocalCluster(cpu=2, gpus=0)
    yield c
    c.shutdown(kill_running=True)


def _report_pid_and_print():
    print("to stdout")
    print("to stderr", file=__import__("sys").stderr)
    return os.getpid()


def _raise_value_error():
    raise ValueError("bad row 7 in shard 3")


def _die():
    print("about to die")
    os.kill(os.getpid(), signal.SIGKILL)


def _read_env(name):
    return os.environ.get(name)


def _occupy(slot_dir: str, want: int) -> int:
    """Register as running, wait until `want` tasks run together (or 30 s), return how many did at most."""
    me = Path(slot_dir) / f"{os.getpid()}"
    me.write_text(os.environ.get("CUDA_VISIBLE_DEVICES", ""))
    deadline = time.monotonic() + 30
    seen = 0
    while time.monotonic() < deadline:
        seen = max(seen, len(os.listdir(slot_dir)))
        if seen >= want:
            break
        time.sleep(0.02)
    time.sleep(0.2)
    seen = max(seen, len(os.listdir(slot_dir)))
    me.unlink()
    return seen


def test_task_runs_in_another_process_and_its_output_goes_to_the_log(cluster, tmp_path):
    log = tmp_path / "logs" / "step.log"
    pid = cluster.submit(_report_pid_and_print, name="hello", log_path=str(log)).result(timeout=60)
    assert pid != os.getpid()
    text = log.read_text()
    assert "=== fray: task 'hello' starting" in text
    assert "to stdout" in text and "to stderr" in text


def test_task_exception_comes_back_as_itself_with_its_traceback(cluster, tmp_path):
    future = cluster.submit(_raise_value_error, name="bad", log_path=str(tmp_path / "bad.log"))
    with pytest.raises(ValueError, match="bad row 7 in shard 3") as err:
        future.result(timeout=60)
    assert any("_raise_value_error" in note for note in err.value.__notes__)


def test_a_killed_task_process_fails_with_its_log_tail(cluster, tmp_path):
    future = cluster.submit(_die, name="doomed", log_path=str(tmp_path / "doomed.log"))
    with pytest.raises(TaskLostError, match=r"(?s)task 'doomed'.*exited with code -9.*about to die"):
        future.result(timeout=60)


def test_a_task_larger_than_the_machine_fails_at_once(cluster):
    too_big = [
        ResourceConfig.with_cpu(3),
        ResourceConfig.with_gpu("H100", 1),
        ResourceConfig.with_cpu(1, ram=cluster.capacity.ram + 1),
        ResourceConfig.with_tpu("v4-8"),
        ResourceConfig(pip_packages=["surely-not-installed-pkg-xyz"]),
        ResourceConfig.with_cpu(cluster.capacity.cpu, replicas=2),  # a gang holds R times its request
    ]
    for resources in too_big:
        future = cluster.submit(_report_pid_and_print, name="huge", resources=resources)
        assert future.done()
        with pytest.raises(ResourcesUnavailableError, match="task 'huge' cannot run on this LocalCluster"):
            future.result()


def test_running_tasks_never_exceed_the_cpu_limit(cluster, tmp_path):
    slots = tmp_path / "slots"
    slots.mkdir()
    task = functools.partial(_occupy, str(slots), 2)
    futures = [cluster.submit(task, name=f"t{i}", resources=ResourceConfig.with_cpu(1)) for i in range(4)]
    assert [f.result(timeout=120) for f in futures] == [2, 2, 2, 2]


def test_gpus_are_handed_out_one_task_each(tmp_path):
    cluster = LocalCluster(cpu=8, gpus=2)
    slots = tmp_path / "slots"
    slots.mkdir()
    try:
        gpu = ResourceConfig.with_gpu("auto", 1, cpu=0.5)
        wants = [2, 2, 1]
        futures = [
            cluster.submit(functools.partial(_occupy, str(slots), want), name=f"g{i}", resources=gpu)
            for i, want in enumerate(wants)
        ]
        seen = [f.result(timeout=120) for f in futures]
        assert seen[:2] == [2, 2] and seen[2] <= 2
        devices = cluster.submit(
            functools.partial(_read_env, "CUDA_VISIBLE_DEVICES"), name="d", resources=gpu
        )
        assert devices.result(timeout=60) in {"0", "1"}
        cpu_only = cluster.submit(functools.partial(_read_env, "CUDA_VISIBLE_DEVICES"), name="c")
        assert cpu_only.result(timeout=60) == ""
    finally:
        cluster.shutdown()


def test_memory_limit_serialises_tasks_that_do_not_fit_together(tmp_path):
    cluster = LocalCluster(cpu=8, ram=1024**3)
    slots = tmp_path / "slots"
    slots.mkdir()
    try:
        task = functools.partial(_occupy, str(slots), 1)
        futures = [
            cluster.submit(task, name=f"m{i}", resources=ResourceConfig.with_cpu(1, ram="600MiB"))
            for i in range(3)
        ]
        assert [f.result(timeout=120) for f in futures] == [1, 1, 1]
    finally:
        cluster.shutdown()


def test_env_vars_reach_the_task(cluster):
    resources = ResourceConfig.with_cpu(env_vars={"FRAY_TEST_FLAG": "on"})
    future = cluster.submit(functools.partial(_read_env, "FRAY_TEST_FLAG"), name="env", resources=resources)
    assert future.result(timeout=60) == "on"


def test_log_on_a_remote_filesystem_is_uploaded():
    cluster = LocalCluster(cpu=1)
    try:
        cluster.submit(_report_pid_and_print, name="remote", log_path="memory://fray-test/remote.log").result(
            timeout=60
        )
    finally:
        cluster.shutdown()
    with fsspec.open("memory://fray-test/remote.log", "r") as f:
        assert "to stdout" in f.read()
