"""Per-step dispatch overhead of LocalCluster and RayCluster, against in-thread execution.

Two levels, 200 trivial units each:
- tasks: `cluster.submit(task)` of a function that returns a small value; baseline: calling it in a
  loop on this thread.
- steps: a StepRunner run of 200 independent trivial steps (each writes one small file) through
  each cluster; baseline: the same run through ThreadCluster (the steps execute in-thread).

Ray is started locally (`ray.init(num_cpus=N)`) before timing; its start-up is reported apart.
Prints one JSON object: seconds per unit for each cluster, the overhead per unit over the baseline
in milliseconds, and the ratio cluster time / baseline time.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time

from fray.cluster import LocalCluster, RayCluster, ThreadCluster
from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec

N = 200


def trivial_task(i: int = 0) -> int:
    """The unit of work: almost nothing, so what is measured is dispatch."""
    return i * 2


def trivial_step(path: str) -> dict:
    """A step that writes one small file."""
    with open(f"{path}/out.txt", "w") as f:
        f.write("x")
    return {"ok": True}


def time_tasks(cluster) -> float:
    start = time.perf_counter()
    futures = [cluster.submit(lambda i=i: trivial_task(i), name=f"t{i}") for i in range(N)]
    assert [f.result() for f in futures] == [trivial_task(i) for i in range(N)]
    return time.perf_counter() - start


def time_steps(cluster, root: str, label: str) -> float:
    steps = [StepSpec(name=f"s{i}", fn=trivial_step, hash_attrs={"i": i}) for i in range(N)]
    runner = StepRunner(prefix=f"{root}/{label}", cluster=cluster, progress=False)
    start = time.perf_counter()
    result = runner.run(steps)
    elapsed = time.perf_counter() - start
    assert set(result.outcomes.values()) == {"succeeded"} and len(result.outcomes) == N
    return elapsed


def figures(seconds: float, baseline: float) -> dict:
    return {
        "s_per_unit": round(seconds / N, 6),
        "overhead_ms_per_unit": round((seconds - baseline) / N * 1e3, 3),
        "ratio_vs_in_thread": round(seconds / baseline, 1),
    }


def main() -> None:
    cpus = len(os.sched_getaffinity(0))
    root = tempfile.mkdtemp(prefix="fray-dispatch-")
    os.environ.pop("RAY_ADDRESS", None)
    try:
        start = time.perf_counter()
        assert [trivial_task(i) for i in range(N)] == [2 * i for i in range(N)]
        in_thread_tasks = time.perf_counter() - start
        local = LocalCluster()
        local_tasks = time_tasks(local)
        local_steps = time_steps(local, root, "local")
        local.shutdown()
        threads = ThreadCluster(max_workers=cpus)
        thread_steps = time_steps(threads, root, "thread")
        threads.shutdown()
        start = time.perf_counter()
        ray_cluster = RayCluster(max_retries=0)
        ray_start = time.perf_counter() - start
        time_tasks(ray_cluster)  # warm the worker pool: dispatch, not process start-up, is measured
        ray_tasks = time_tasks(ray_cluster)
        ray_steps = time_steps(ray_cluster, root, "ray")
        ray_cluster.shutdown()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({
        "benchmark": "fray_dispatch",
        "units": N,
        "cpus": cpus,
        "tasks": {
            "in_thread_s_per_unit": round(in_thread_tasks / N, 9),
            "local": figures(local_tasks, in_thread_tasks),
            "ray": figures(ray_tasks, in_thread_tasks),
        },
        "steps": {
            "thread_cluster_s_per_step": round(thread_steps / N, 6),
            "local": figures(local_steps, thread_steps),
            "ray": figures(ray_steps, thread_steps),
        },
        "ray_start_s": round(ray_start, 2),
    }))


if __name__ == "__main__":
    main()
