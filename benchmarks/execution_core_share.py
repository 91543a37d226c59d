"""A sweep of nano trainings on the default LocalCluster: do steps that run at once share the cores?

Four `train_lm` steps (llama_nano, as the lr_sweep tutorial declares them: four learning rates, the
same tokenized data) run three ways, each in a fresh interpreter under a fresh prefix that already
holds the tokenized data:
- `default`: `StepRunner().run(...)`, the trainings asking for no resources (the default cluster
  decides how many run at once and with how many threads);
- `one_at_a_time`: `StepRunner(max_concurrent=1)`, each training with every core;
- `two_at_a_time`: `StepRunner(max_concurrent=2)`, each training on one thread (`cpu_threads=1`).
The goal: `default` takes at most 1.05x the better of the other two. The kinds are interleaved in
each round (`--repeats`), and each figure is its best round.

    .venv/bin/python benchmarks/execution_core_share.py [--steps 60] [--models 4] [--repeats 1]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from fresh import load_average

GOAL_RATIO = 1.05
KINDS = ("default", "one_at_a_time", "two_at_a_time")

SWEEP = """
import json, sys, time
from experiments.llama import llama_nano
from experiments.marin_tokenizer import marin_tokenizer
from marin.execution.step_runner import StepRunner
from marin.experiment.data import tokenized
from marin.experiment.train import train_lm
from marin.training.optim import AdamConfig

kind, steps, models = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
stories = tokenized(
    name="tokenized/tinystories-synth", source="marin://tinystories-synth", tokenizer=marin_tokenizer,
    sample_count=2000,
)
runs = [
    train_lm(
        name=f"checkpoints/nano-lr{lr:g}",
        model=llama_nano,
        optimizer=AdamConfig(learning_rate=lr, weight_decay=0.1),
        datasets={stories: 1.0},
        batch_size=8,
        seq_len=256,
        num_train_steps=steps,
        steps_per_eval=steps,
        cpu_threads=1 if kind == "two_at_a_time" else None,
    )
    for lr in (1e-3, 2e-3, 3e-3, 5e-3, 1e-2, 2e-2)[:models]
]
if kind == "data":
    StepRunner(progress=False).run([stories])
else:
    concurrent = {"default": None, "one_at_a_time": 1, "two_at_a_time": 2}[kind]
    started = time.perf_counter()
    StepRunner(max_concurrent=concurrent, progress=False).run(runs)
    print(json.dumps({"seconds": time.perf_counter() - started}))
"""


def _run(script: str, root: str, prefix: str, *args: str) -> dict | None:
    env = {**os.environ, "MARIN_PREFIX": prefix}
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (repo, env.get("PYTHONPATH", "")) if p)
    done = subprocess.run(
        [sys.executable, script, *args], env=env, cwd=root, capture_output=True, text=True, timeout=3600
    )
    if done.returncode != 0:
        raise SystemExit(f"the sweep ({' '.join(args)}) exited {done.returncode}:\n{done.stderr[-4000:]}")
    lines = done.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--models", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="marin-core-share-")
    try:
        script = os.path.join(root, "sweep.py")
        with open(script, "w") as f:
            f.write(SWEEP)
        data = os.path.join(root, "data")
        _run(script, root, data, "data", str(args.steps), str(args.models))
        best = dict.fromkeys(KINDS, float("inf"))
        for r in range(args.repeats):
            for kind in KINDS:
                prefix = os.path.join(root, f"{kind}-{r}")
                shutil.copytree(data, prefix)  # the tokenized data, cached
                seconds = _run(script, root, prefix, kind, str(args.steps), str(args.models))["seconds"]
                best[kind] = min(best[kind], seconds)
                shutil.rmtree(prefix, ignore_errors=True)
                time.sleep(1)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    baseline = min(best["one_at_a_time"], best["two_at_a_time"])
    ratio = best["default"] / baseline
    print(
        json.dumps(
            {
                "benchmark": "execution_core_share",
                "models": args.models,
                "train_steps": args.steps,
                "cores": len(os.sched_getaffinity(0)),
                "repeats": args.repeats,
                **{f"{kind}_s": round(best[kind], 2) for kind in KINDS},
                "ratio_vs_better_baseline": round(ratio, 3),
                "goal_ratio": GOAL_RATIO,
                "goal_met": ratio <= GOAL_RATIO,
                "load_average": load_average(),
            }
        )
    )


if __name__ == "__main__":
    main()
