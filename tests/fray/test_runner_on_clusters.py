"""The step runner dispatching through fray clusters: the default LocalCluster, and a real Ray cluster
whose records match a local run and which survives a killed worker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fray.cluster import LocalCluster, ResourceConfig, ThreadCluster
from fray.cluster.errors import FrayError
from fray.cluster.local_cluster import LocalCluster as LocalClusterType
from fray.cluster.select import cluster_from_env
from marin.execution.context import current
from marin.execution.errors import StepFailedError
from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec

pytestmark = pytest.mark.timeout(240)


def make_numbers(path):
    Path(path, "numbers.txt").write_text(" ".join(str(i) for i in range(10)))
    print("made 10 numbers")
    return {"count": 10}


def square(path):
    numbers = Path(current().path_of("numbers"), "numbers.txt").read_text().split()
    Path(path, "squares.txt").write_text(" ".join(str(int(n) ** 2) for n in numbers))
    return {"count": len(numbers)}


def evens(path):
    numbers = Path(current().path_of("numbers"), "numbers.txt").read_text().split()
    kept = [n for n in numbers if int(n) % 2 == 0]
    Path(path, "evens.txt").write_text(" ".join(kept))
    return {"count": len(kept), "flag": os.environ.get("EVENS_FLAG")}


def total(path):
    squares = Path(current().path_of("square"), "squares.txt").read_text().split()
    kept = Path(current().path_of("evens"), "evens.txt").read_text().split()
    value = sum(map(int, squares)) + sum(map(int, kept))
    Path(path, "total.txt").write_text(str(value))
    return {"total": value}


def report(path):
    value = Path(current().path_of("total"), "total.txt").read_text()
    Path(path, "report.md").write_text(f"total = {value}\n")
    return {"report": "report.md"}


def build_dag() -> list[StepSpec]:
    """Five steps, each asking for different resources (all of which fit a 1-CPU node)."""
    numbers = StepSpec(name="numbers", fn=make_numbers, resources=ResourceConfig.with_cpu(1))
    squared = StepSpec(
        name="square", fn=square, deps=[numbers], resources=ResourceConfig.with_cpu(0.5, ram="64MiB")
    )
    even = StepSpec(
        name="evens",
        fn=evens,
        deps=[numbers],
        resources=ResourceConfig.with_cpu(0.25, env_vars={"EVENS_FLAG": "set-by-resources"}),
    )
    summed = StepSpec(name="total", fn=total, deps=[squared, even], resources=None)
    reported = StepSpec(name="report", fn=report, deps=[summed], resources=ResourceConfig(cpu=1, disk="1GiB"))
    return [numbers, squared, even, summed, reported]


def _records(result, steps) -> dict[str, dict]:
    """What must be identical wherever the steps ran: keys, states, artifacts, and the step records
    except times, places and absolute paths."""
    records = {}
    for step in steps:
        out = Path(result.output_path(step))
        info = json.loads((out / ".executor_info").read_text())
        status = json.loads((out / ".executor_status").read_text())
        records[step.name] = {
            "dir": out.name,
            "key": status["key"],
            "states": [e["state"] for e in status["events"]],
            "artifact": json.loads((out / ".artifact.json").read_text()),
            "info": {
                k: info[k] for k in ("name", "key", "hash_attrs", "version", "fn", "resources", "key_record")
            },
            "deps": [(d["name"], d["key"]) for d in info["deps"]],
        }
    return records


def test_default_cluster_is_local_unless_marin_cluster_names_another(monkeypatch, tmp_path):
    monkeypatch.delenv("MARIN_CLUSTER", raising=False)
    chosen = cluster_from_env(str(tmp_path))
    assert isinstance(chosen, LocalClusterType)
    chosen.shutdown()
    in_memory = cluster_from_env("memory://somewhere")
    assert isinstance(in_memory, ThreadCluster)  # a subprocess could not see this process's memory://
    in_memory.shutdown()
    monkeypatch.setenv("MARIN_CLUSTER", "thread")
    assert isinstance(cluster_from_env(str(tmp_path)), ThreadCluster)
    monkeypatch.setenv("MARIN_CLUSTER", "slurm")
    with pytest.raises(FrayError, match="MARIN_CLUSTER='slurm' names no cluster; use 'local'"):
        cluster_from_env(str(tmp_path))


def _print_then_fail():
    print("loading shard 3 of 8")
    raise RuntimeError("shard 3 is corrupt")


def test_local_cluster_runner_captures_each_log_and_shows_its_tail_on_failure(monkeypatch, tmp_path):
    monkeypatch.delenv("MARIN_CLUSTER", raising=False)  # the product default: LocalCluster
    good = StepSpec(name="numbers", fn=make_numbers)
    bad = StepSpec(name="bad", fn=_print_then_fail)
    runner = StepRunner(prefix=str(tmp_path), progress=False)
    with pytest.raises(StepFailedError) as err:
        runner.run([good, bad])
    assert "step 'bad' failed: RuntimeError: shard 3 is corrupt" in str(err.value)
    failure = err.value.failures["bad"]  # the whole error: its line, the traceback, the log's tail
    assert failure.startswith("RuntimeError: shard 3 is corrupt\n")
    assert "last lines of its log:" in failure and "  | loading shard 3 of 8" in failure
    good_out = runner.plan([good]).of(good).output_path
    assert "made 10 numbers" in Path(good_out, ".executor_log").read_text()


def test_five_step_dag_with_mixed_resources_on_ray_matches_a_local_run(ray_cluster, tmp_path):
    steps = build_dag()
    local = LocalCluster(cpu=2)
    try:
        local_result = StepRunner(prefix=str(tmp_path / "local"), cluster=local, progress=False).run(steps)
    finally:
        local.shutdown()
    ray_result = StepRunner(prefix=str(tmp_path / "ray"), cluster=ray_cluster, progress=False).run(steps)
    assert set(ray_result.outcomes.values()) == {"succeeded"}
    ray_records = _records(ray_result, steps)
    assert ray_records == _records(local_result, steps)
    assert ray_records["evens"]["artifact"]["result"]["flag"] == "set-by-resources"
    assert ray_records["square"]["info"]["resources"]["ram"] == 64 * 1024**2
    numbers_log = Path(ray_result.output_path(steps[0]), ".executor_log").read_text()
    assert "made 10 numbers" in numbers_log and "=== fray: task 'numbers' starting" in numbers_log
    again = StepRunner(prefix=str(tmp_path / "ray"), cluster=ray_cluster, progress=False).run(steps)
    assert set(again.outcomes.values()) == {"cached"}


def train_with_checkpoints(path):
    """A stand-in training loop: 6 units of work, a checkpoint after each, resuming from the last one.

    The first attempt publishes its pid after unit 3 and blocks until it is killed.
    """
    ckpt = Path(path, "checkpoint.txt")
    start = int(ckpt.read_text()) if ckpt.exists() else 0
    control = Path(os.environ["FRAY_TEST_CONTROL"])
    for unit in range(start, 6):
        ckpt.write_text(str(unit + 1))
        if unit + 1 == 3 and start == 0:
            (control / "tmp").write_text(str(os.getpid()))
            (control / "tmp").rename(control / "victim.pid")
            time.sleep(600)
    with open(control / "completions", "a") as f:
        f.write("done\n")
    return {"resumed_from": start, "units": 6}


def test_worker_killed_mid_step_is_retried_resumes_from_its_checkpoint_and_completes_once(
    ray_cluster, tmp_path
):
    control = tmp_path / "control"
    control.mkdir()
    step = StepSpec(
        name="train",
        fn=train_with_checkpoints,
        resources=ResourceConfig.with_cpu(1, env_vars={"FRAY_TEST_CONTROL": str(control)}),
    )
    runner = StepRunner(prefix=str(tmp_path / "out"), cluster=ray_cluster, progress=False)
    outcome = {}
    thread = threading.Thread(target=lambda: outcome.update(result=runner.run([step])))
    thread.start()
    victim = control / "victim.pid"
    deadline = time.monotonic() + 120
    while not victim.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    os.kill(int(victim.read_text()), signal.SIGKILL)  # the Ray worker process running the step
    thread.join(timeout=180)
    result = outcome["result"]
    out = Path(result.output_path(step))
    assert result.results[str(out)] == {"resumed_from": 3, "units": 6}
    assert (control / "completions").read_text() == "done\n"
    events = json.loads((out / ".executor_status").read_text())["events"]
    assert [e["state"] for e in events] == ["RUNNING", "SUCCESS"]
    assert not list(out.glob(".executor_lease.*"))
    assert (out / ".executor_log").read_text().count("=== fray: task 'train' starting") == 2


CLI_EXPERIMENT = """
import os
from pathlib import Path

from marin.execution.step_spec import StepSpec


def where(path):
    print("running in my own process")
    return {"pid": os.getpid(), "parent": os.getppid()}


located = StepSpec(name="located", fn=where)
"""


def test_marin_run_defaults_to_a_process_per_step(tmp_path):
    (tmp_path / "exp.py").write_text(CLI_EXPERIMENT)
    env = {k: v for k, v in os.environ.items() if k != "MARIN_CLUSTER"}
    done = subprocess.run(
        [sys.executable, "-m", "marin.cli", "run", "exp.py", "--prefix", str(tmp_path / "out")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    [out] = (tmp_path / "out").glob("located-*")
    runner_pid = json.loads((out / ".executor_status").read_text())["events"][-1]["pid"]
    ran = json.loads((out / ".artifact.json").read_text())["result"]
    assert ran["parent"] == runner_pid and ran["pid"] != runner_pid  # a child of the runner, not the runner
    assert "running in my own process" in (out / ".executor_log").read_text()
