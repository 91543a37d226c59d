"""Per-step cost: a cold run of 2,000 trivial independent steps, as a user runs it (a fresh interpreter,
`StepRunner().run(...)` on the default cluster, LocalCluster, with factory-made step functions),
against a plain loop calling the same functions on pre-made directories.

Prints one JSON object: microseconds per step on the default cluster (goal <= 1,000 us, which a cold
10,000-step DAG in <= 10 s needs); beside it the same run on ThreadCluster (the engine's own cost,
no process hop); the plain loop's figure and the ratio to it; the load average and whether the goal
is met. Each figure is the best of --repeats fresh interpreters, timed around the run only.

    .venv/bin/python benchmarks/execution_per_step.py [--steps 2000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time

from fresh import best_of, fresh_json, load_average, make_step_fn, plain_loop_seconds

GOAL_US = 1000.0


def child(kind: str, root: str, n: int) -> None:
    """In a fresh interpreter: one cold run of n independent steps on `kind`; prints {"seconds": ...}."""
    from fray.cluster import ThreadCluster
    from marin.execution.step_runner import StepRunner
    from marin.execution.step_spec import StepSpec

    fns = [make_step_fn(f"t{i}") for i in range(n)]
    if kind == "loop":
        print(json.dumps({"seconds": plain_loop_seconds(fns, root)}))
        return
    steps = [StepSpec(name=f"t{i}", fn=fn, hash_attrs={"i": i}) for i, fn in enumerate(fns)]
    runner = StepRunner(prefix=root) if kind == "local" else StepRunner(prefix=root, cluster=ThreadCluster(max_workers=4))
    start = time.perf_counter()
    result = runner.run(steps)
    seconds = time.perf_counter() - start
    assert set(result.outcomes.values()) == {"succeeded"} and len(result.outcomes) == n
    print(json.dumps({"seconds": seconds}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("KIND", "ROOT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.steps)
        return
    root = tempfile.mkdtemp(prefix="marin-per-step-")
    load_before = load_average()
    runs = iter(range(1_000_000))

    def measure(kind: str) -> float:
        prefix = f"{root}/{kind}-{next(runs)}"
        seconds = fresh_json(__file__, "--steps", str(args.steps), "--child", kind, prefix)["seconds"]
        shutil.rmtree(prefix, ignore_errors=True)
        return seconds

    try:
        best = best_of(args.repeats, ["local", "thread", "loop"], measure)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    n = args.steps
    local_us, thread_us, loop_us = (best[k] / n * 1e6 for k in ("local", "thread", "loop"))
    print(json.dumps({
        "benchmark": "execution_per_step",
        "steps": n,
        "fresh_interpreter_per_run": True,
        "step_functions": "factory-made closures",
        "repeats_best_of": args.repeats,
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "local_cluster_s": round(best["local"], 3),
        "local_cluster_us_per_step": round(local_us, 1),
        "thread_cluster_us_per_step": round(thread_us, 1),
        "plain_loop_us_per_step": round(loop_us, 1),
        "ratio_local_vs_plain_loop": round(local_us / loop_us, 1),
        "goal_us_per_step": GOAL_US,
        "meets_goal": local_us <= GOAL_US,
    }))


if __name__ == "__main__":
    main()
