"""A cold chain of 30 trivial steps, as a user runs it: a fresh interpreter, `StepRunner().run(...)` on
the default cluster (LocalCluster: steps in warm worker processes, the first one started by the
run), step functions made by a factory. Each step waits on the previous, so this measures per-step
latency: scheduling, leases, records, the hop to the worker and back.

Prints one JSON object: the chain's wall time on the default cluster (goal <= 0.5 s); beside it the
same chain on ThreadCluster; and as same-run baseline the 30 functions called in a plain loop, with
the ratio to it, the load average and whether the goal is met. Each figure is the best of --repeats
fresh interpreters, timed around the run only (interpreter start and imports are left out).

    .venv/bin/python benchmarks/execution_chain.py [--steps 30] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json

from fresh import best_of_fresh, load_average, make_step_fn, plain_loop_seconds, run_steps_seconds

GOAL_S = 0.5


def child(kind: str, root: str, n: int) -> None:
    """In a fresh interpreter: one cold run of the chain on `kind`; prints {"seconds": ...}."""
    from marin.execution.step_spec import StepSpec

    fns = [make_step_fn(f"link{i}") for i in range(n)]
    if kind == "loop":
        print(json.dumps({"seconds": plain_loop_seconds(fns, root)}))
        return
    steps: list[StepSpec] = []
    for i, fn in enumerate(fns):
        steps.append(StepSpec(name=f"link{i}", fn=fn, deps=steps[-1:], hash_attrs={"i": i}))
    print(json.dumps({"seconds": run_steps_seconds(kind, root, [steps[-1]])}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("KIND", "ROOT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.steps)
        return
    load_before = load_average()
    best = best_of_fresh(__file__, ["local", "thread", "loop"], args.repeats, "--steps", str(args.steps))
    local, thread, loop = best["local"], best["thread"], best["loop"]
    print(
        json.dumps(
            {
                "benchmark": "execution_chain",
                "steps": args.steps,
                "fresh_interpreter_per_run": True,
                "step_functions": "factory-made closures",
                "repeats_best_of": args.repeats,
                "load_average_before": load_before,
                "load_average_after": load_average(),
                "cold_chain_local_cluster_s": round(local, 4),
                "per_step_ms_local_cluster": round(local / args.steps * 1e3, 2),
                "cold_chain_thread_cluster_s": round(thread, 4),
                "plain_loop_s": round(loop, 6),
                "ratio_local_vs_plain_loop": round(local / loop, 1),
                "goal_s": GOAL_S,
                "meets_goal": local <= GOAL_S,
            }
        )
    )


if __name__ == "__main__":
    main()
