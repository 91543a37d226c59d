"""What the stop grace costs, and what it buys: a run that is not stopped pays nothing for it, and a
Ctrl-C'd training exits within one step, one checkpoint write and 2 s.

1. No interruption: a cold chain of 30 trivial steps (execution_chain.py's), each run a fresh
   interpreter on the default LocalCluster, with the default grace (`StepRunner()`, 60 s) and, as
   the same-run baseline, with none (`stop_grace_s=0`), interleaved A, B, A, B; the figure is the
   ratio of their medians (goal <= 1.05: the grace is only read once a run is stopped).
2. Ctrl-C: `marin run` of the demo's training (experiments/tutorials/demo.py's `llama_nano` run:
   seq 2048, batch 4, default checkpoint settings, its token cache made once beforehand) in its own
   process group gets SIGINT to the group, as a terminal sends it, at a random step; the figure is
   the time from the signal until `marin run` has exited. Its bound is measured in the same run: the
   median `step_seconds` of that training's steps, plus the seconds one checkpoint of that model
   (weights, AdamW state, RNG) takes to write with the trainer's Checkpointer, plus 2 s (goal: the
   worst exit within it). Each stopped run is checked: it exited 130 with a checkpoint of the step
   it stopped at.

Prints one JSON object with both figures, their baselines and ratios, the load average and whether
each goal is met.

    .venv/bin/python benchmarks/execution_stop_grace.py [--rounds 4] [--stops 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

from fresh import fresh_json, load_average, make_step_fn, user_environment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHAIN_GOAL = 1.05
EXIT_SLACK_S = 2.0
EXPERIMENT = textwrap.dedent("""
    from experiments.tutorials.demo import nano_tinystories_model, tinystories_tokenized
""")


def chain_child(grace: float, prefix: str, n: int) -> None:
    """In a fresh interpreter: one cold run of the chain with `stop_grace_s=grace`; prints {"seconds"}."""
    from marin.execution.step_runner import StepRunner
    from marin.execution.step_spec import StepSpec

    steps: list[StepSpec] = []
    for i in range(n):
        steps.append(
            StepSpec(name=f"link{i}", fn=make_step_fn(f"link{i}"), deps=steps[-1:], hash_attrs={"i": i})
        )
    runner = StepRunner(prefix=prefix, progress=False, stop_grace_s=grace)
    start = time.perf_counter()
    result = runner.run([steps[-1]])
    seconds = time.perf_counter() - start
    assert set(result.outcomes.values()) == {"succeeded"}, result.outcomes
    print(json.dumps({"seconds": seconds}))


def chain_ratio(rounds: int, steps: int) -> dict:
    """Medians of the cold chain with the default grace and with none, interleaved."""
    from marin.execution.interrupt import DEFAULT_STOP_GRACE_S

    root = tempfile.mkdtemp(prefix="marin-bench-grace-")
    times: dict[float, list[float]] = {DEFAULT_STOP_GRACE_S: [], 0.0: []}
    try:
        for r in range(rounds):
            order = (DEFAULT_STOP_GRACE_S, 0.0) if r % 2 == 0 else (0.0, DEFAULT_STOP_GRACE_S)
            for grace in order:
                prefix = os.path.join(root, f"{grace:g}-{r}")
                args = ("--steps", str(steps), "--chain-child", str(grace), prefix)
                times[grace].append(fresh_json(__file__, *args)["seconds"])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    with_grace, without = statistics.median(times[DEFAULT_STOP_GRACE_S]), statistics.median(times[0.0])
    return {
        "steps": steps,
        "rounds": rounds,
        "grace_s": DEFAULT_STOP_GRACE_S,
        "cold_chain_median_s": round(with_grace, 4),
        "baseline_no_grace_median_s": round(without, 4),
        "ratio": round(with_grace / without, 3),
        "goal_ratio": CHAIN_GOAL,
        "meets_goal": with_grace / without <= CHAIN_GOAL,
    }


def _steps_logged(output: str | None) -> int:
    try:
        with open(os.path.join(output, "metrics.jsonl")) as f:
            return sum(1 for line in f if line.endswith("\n"))
    except (FileNotFoundError, TypeError):
        return 0


def _train_output(prefix: str) -> str | None:
    folder = os.path.join(prefix, "checkpoints")
    found = (
        [n for n in os.listdir(folder) if n.startswith("marin-nano-tinystories-")]
        if os.path.isdir(folder)
        else []
    )
    return os.path.join(folder, found[0]) if found else None


def one_stop(work: str, env: dict[str, str], number: int) -> dict:
    """One `marin run` of the demo's training, SIGINT to its group at a random step: seconds to exit."""
    steps = 400 + number  # a key of its own per stop: a fresh training on the shared token cache
    run_env = {**env, "MARIN_DEMO_TRAIN_STEPS": str(steps)}
    prefix = env["MARIN_PREFIX"]
    at = random.Random(number).randrange(5, 40)
    folder = os.path.join(prefix, "checkpoints")
    before = set(os.listdir(folder)) if os.path.isdir(folder) else set()
    with open(os.path.join(work, f"stop-{number}.log"), "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "marin.cli", "run", "exp.py"],
            cwd=work,
            env=run_env,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    output = None
    deadline = time.monotonic() + 600
    while _steps_logged(output) < at:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the training never reached step {at}; see {work}/stop-{number}.log")
        if output is None and os.path.isdir(os.path.join(prefix, "checkpoints")):
            new = set(os.listdir(os.path.join(prefix, "checkpoints"))) - before
            output = os.path.join(prefix, "checkpoints", new.pop()) if new else None
        time.sleep(0.01)
    signalled = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    code = proc.wait(timeout=300)
    exit_s = time.monotonic() - signalled
    with open(os.path.join(output, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f]
    checkpoints = os.listdir(os.path.join(output, "checkpoints"))
    assert code == 130 and len(checkpoints) == 1, (code, checkpoints)
    step = int(checkpoints[0].split("-")[1])
    assert at <= step == records[-1]["step"], (at, step)
    return {
        "at": at,
        "checkpoint_step": step,
        "exit_s": exit_s,
        "step_seconds": [r["step_seconds"] for r in records],
    }


def one_checkpoint_seconds(cache: str, root: str) -> float:
    """Median wall time of writing one whole checkpoint of the demo's model (weights, AdamW state, RNG)."""
    import torch

    from experiments.llama import llama_nano
    from marin.data.token_cache import TokenCache
    from marin.training.checkpoint import Checkpointer, TrainState
    from marin.training.optim import AdamConfig
    from marin.training.rng import capture_rng

    model = llama_nano.with_vocab_size(TokenCache.open(cache).vocab_size).build()
    optimizer = AdamConfig(learning_rate=6e-4, weight_decay=0.1).build(model)
    model(torch.zeros((1, 8), dtype=torch.long), torch.zeros((1, 8), dtype=torch.long))[0].backward()
    optimizer.step()
    checkpointer = Checkpointer(os.path.join(root, "timed"), sharded=False, keep_last_k=1)
    times = []
    for step in range(1, 4):
        started = time.perf_counter()
        checkpointer.save(
            model=model, optimizer=optimizer, state=TrainState(step, {}, capture_rng(), "bench", {})
        )
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def ctrl_c_exits(stops: int) -> dict:
    """SIGINT at a random step of `stops` demo trainings; the worst exit against its measured bound."""
    work = tempfile.mkdtemp(prefix="marin-bench-ctrl-c-")
    try:
        with open(os.path.join(work, "exp.py"), "w") as f:
            f.write(EXPERIMENT)
        env = user_environment({"MARIN_PREFIX": os.path.join(work, "out"), "PYTHONPATH": ROOT})
        env.pop("MARIN_CLUSTER", None)
        made = subprocess.run(
            [sys.executable, "-m", "marin.cli", "run", "exp.py", "--step", "tinystories_tokenized"],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if made.returncode != 0:
            raise RuntimeError(f"the token cache was not made:\n{made.stderr[-3000:]}")
        done = [one_stop(work, env, i) for i in range(stops)]
        caches = os.path.join(work, "out", "tokenized")
        (cache,) = [os.path.join(caches, n) for n in os.listdir(caches)]
        checkpoint_s = one_checkpoint_seconds(cache, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    step_s = statistics.median(
        s for d in done for s in d["step_seconds"][1:]
    )  # the first step compiles/warms
    bound = step_s + checkpoint_s + EXIT_SLACK_S
    worst = max(d["exit_s"] for d in done)
    return {
        "stops": stops,
        "stopped_at_steps": [d["at"] for d in done],
        "checkpoint_steps": [d["checkpoint_step"] for d in done],
        "exit_s": [round(d["exit_s"], 3) for d in done],
        "worst_exit_s": round(worst, 3),
        "step_s_median": round(step_s, 4),
        "checkpoint_write_s": round(checkpoint_s, 4),
        "bound_s": round(bound, 3),
        "worst_exit_over_bound": round(worst / bound, 3),
        "meets_goal": worst <= bound,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=4, help="interleaved rounds of the cold chain")
    parser.add_argument("--steps", type=int, default=30, help="steps of the chain")
    parser.add_argument("--stops", type=int, default=3, help="Ctrl-C'd trainings")
    parser.add_argument("--chain-child", nargs=2, metavar=("GRACE", "PREFIX"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.chain_child:
        chain_child(float(args.chain_child[0]), args.chain_child[1], args.steps)
        return
    load_before = load_average()
    chain = chain_ratio(args.rounds, args.steps)
    stops = ctrl_c_exits(args.stops)
    print(
        json.dumps(
            {
                "benchmark": "execution_stop_grace",
                "fresh_interpreter_per_run": True,
                "cluster": "LocalCluster (the default)",
                "load_average_before": load_before,
                "load_average_after": load_average(),
                "no_interrupt": chain,
                "ctrl_c_training": stops,
                "meets_goal": chain["meets_goal"] and stops["meets_goal"],
            }
        )
    )


if __name__ == "__main__":
    main()
