"""Per-unit dispatch overhead of fray's default LocalCluster (and, with --ray, RayCluster), each figure
in a fresh interpreter, against in-thread execution measured the same way.

Two levels, --units trivial units each:
- tasks: `cluster.submit(task)` of a factory-made closure returning a small value; baseline: calling
  the same closures in a loop on this thread.
- steps: a cold `StepRunner().run(...)` of independent factory-made steps (each writes one small
  file) on the default cluster; baseline: the same run on ThreadCluster (the steps run in-thread).

The cluster's start is inside the timing (a user's run pays it); Ray's `ray.init` is reported apart
and its pool warmed first, since a Ray cluster is usually already up. Prints one JSON object:
milliseconds per unit, the overhead over the baseline per unit, the ratio, the load average and
whether LocalCluster's step overhead meets the goal (<= 1 ms per step, which a cold 10,000-step DAG
in <= 10 s needs).

    .venv/bin/python benchmarks/fray_dispatch.py [--units 200] [--repeats 3] [--ray]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time

from fresh import best_of_fresh, fresh_json, load_average, make_step_fn, run_steps_seconds

GOAL_STEP_OVERHEAD_MS = 1.0


def make_task(i: int):
    """A factory-made task: almost nothing, so what is measured is dispatch."""

    def task() -> int:
        return i * 2

    return task


def time_tasks(cluster, n: int) -> float:
    tasks = [make_task(i) for i in range(n)]
    start = time.perf_counter()
    futures = [cluster.submit(task, name=f"t{i}") for i, task in enumerate(tasks)]
    assert [f.result() for f in futures] == [2 * i for i in range(n)]
    return time.perf_counter() - start


def trivial_steps(n: int) -> list:
    from marin.execution.step_spec import StepSpec

    return [StepSpec(name=f"s{i}", fn=make_step_fn(f"s{i}"), hash_attrs={"i": i}) for i in range(n)]


def time_steps_on(cluster, root: str, n: int) -> float:
    from marin.execution.step_runner import StepRunner

    start = time.perf_counter()
    result = StepRunner(prefix=root, cluster=cluster).run(trivial_steps(n))
    elapsed = time.perf_counter() - start
    assert set(result.outcomes.values()) == {"succeeded"} and len(result.outcomes) == n
    return elapsed


def child(kind: str, root: str, n: int) -> dict:
    """One figure, in this fresh interpreter."""
    from fray.cluster import LocalCluster

    if kind == "inline-tasks":
        tasks = [make_task(i) for i in range(n)]
        start = time.perf_counter()
        assert [t() for t in tasks] == [2 * i for i in range(n)]
        return {"seconds": time.perf_counter() - start}
    if kind == "local-tasks":
        start = time.perf_counter()
        cluster = LocalCluster()
        try:
            time_tasks(cluster, n)
        finally:
            cluster.shutdown()
        return {"seconds": time.perf_counter() - start}
    if kind in ("local-steps", "thread-steps"):  # the default cluster, or in-thread
        return {"seconds": run_steps_seconds(kind.partition("-")[0], root, trivial_steps(n))}
    from fray.cluster import RayCluster

    os.environ.pop("RAY_ADDRESS", None)
    start = time.perf_counter()
    cluster = RayCluster(max_retries=0)
    ray_start = time.perf_counter() - start
    try:
        time_tasks(cluster, n)  # warm the worker pool: dispatch, not process start-up, is measured
        tasks = time_tasks(cluster, n)
        steps = time_steps_on(cluster, root, n)
    finally:
        cluster.shutdown()
    return {"seconds": tasks, "steps_seconds": steps, "ray_start_s": ray_start}


def figures(seconds: float, baseline: float, n: int) -> dict:
    return {
        "ms_per_unit": round(seconds / n * 1e3, 3),
        "overhead_ms_per_unit": round((seconds - baseline) / n * 1e3, 3),
        "ratio_vs_baseline": round(seconds / baseline, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--units", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ray", action="store_true", help="also measure RayCluster (starts a local Ray)")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "ROOT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    n = args.units
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], n)))
        return
    load_before = load_average()
    kinds = ["inline-tasks", "local-tasks", "thread-steps", "local-steps"]
    best = best_of_fresh(__file__, kinds, args.repeats, "--units", str(n))
    ray = None
    if args.ray:
        ray_root = tempfile.mkdtemp(prefix="fray-dispatch-ray-")
        try:
            ray = fresh_json(__file__, "--units", str(n), "--child", "ray", ray_root)
        finally:
            shutil.rmtree(ray_root, ignore_errors=True)
    local_steps = figures(best["local-steps"], best["thread-steps"], n)
    print(
        json.dumps(
            {
                "benchmark": "fray_dispatch",
                "units": n,
                "cpus": os.cpu_count(),
                "fresh_interpreter_per_run": True,
                "repeats_best_of": args.repeats,
                "load_average_before": load_before,
                "load_average_after": load_average(),
                "tasks": {
                    "in_thread_ms_per_unit": round(best["inline-tasks"] / n * 1e3, 6),
                    "local": figures(best["local-tasks"], best["inline-tasks"], n),
                    "ray": None if ray is None else figures(ray["seconds"], best["inline-tasks"], n),
                },
                "steps": {
                    "thread_cluster_ms_per_step": round(best["thread-steps"] / n * 1e3, 3),
                    "local": local_steps,
                    "ray": None if ray is None else figures(ray["steps_seconds"], best["thread-steps"], n),
                },
                "ray_start_s": None if ray is None else round(ray["ray_start_s"], 2),
                "goal_local_step_overhead_ms": GOAL_STEP_OVERHEAD_MS,
                "meets_goal": local_steps["overhead_ms_per_unit"] <= GOAL_STEP_OVERHEAD_MS,
            }
        )
    )


if __name__ == "__main__":
    main()
