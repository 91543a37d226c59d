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

from fresh import best_of_fresh, load_average, make_step_fn, plain_loop_seconds, run_steps_seconds

GOAL_US = 1000.0


def child(kind: str, root: str, n: int) -> None:
    """In a fresh interpreter: one cold run of n independent steps on `kind`; prints {"seconds": ...}."""
    from marin.execution.step_spec import StepSpec

    fns = [make_step_fn(f"t{i}") for i in range(n)]
    if kind == "loop":
        print(json.dumps({"seconds": plain_loop_seconds(fns, root)}))
        return
    steps = [StepSpec(name=f"t{i}", fn=fn, hash_attrs={"i": i}) for i, fn in enumerate(fns)]
    print(json.dumps({"seconds": run_steps_seconds(kind, root, steps)}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("KIND", "ROOT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.steps)
        return
    load_before = load_average()
    best = best_of_fresh(__file__, ["local", "thread", "loop"], args.repeats, "--steps", str(args.steps))
    n = args.steps
    local_us, thread_us, loop_us = (best[k] / n * 1e6 for k in ("local", "thread", "loop"))
    print(
        json.dumps(
            {
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
            }
        )
    )


if __name__ == "__main__":
    main()
