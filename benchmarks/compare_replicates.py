"""`marin compare` over replicated configurations, against the item-level paired bootstrap (issue 31).

The workload: 20 evaluations, 4 configurations x 5 seeds (stand-in train and evaluation steps with real
key records, so the replicates are recognised from them), each with 5 metrics on 2,000 items (4
accuracies and a bits-per-byte over 2,000 documents). Timed in a fresh interpreter on one core
(`taskset -c 0` where available, BLAS pinned to one thread), as a user runs it:

- `compare`: `marin compare` of the 20 evaluations: each configuration's mean and every pair's
  difference with seed and item noise (1,000 item resamples), Holm-adjusted, rendered as Markdown;
- `paired`: the same inputs through the item-level paired bootstrap only (`stats.paired_difference`,
  1,000 resamples): once for each pair of configurations (its first seeds) and metric, the same
  number of tests (the baseline of the ratio goal);
- `paired_all_pairs`: the paired bootstrap of every pair of the 20 evaluations and metric, what
  `marin compare` ran on these inputs before it knew replicates (for information; timed once, in the
  first round).

Runs interleave (compare, paired) `--rounds` times; each figure is the best. `--items` shrinks the
workload (the tests run it at 100).
Goals: compare <= 2 s, and compare / paired <= 3. Prints one JSON object with the load average.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fresh import load_average, user_environment  # noqa: E402

CONFIGURATIONS, SEEDS, TASKS = 4, 5, 4

PAIRED = """
import itertools, sys
from marin.evaluation import stats
from marin.evaluation.results import read_items
paths = sys.argv[2:]
scores = [read_items(p).scores() for p in paths]
pairs = itertools.combinations(range(len(paths)), 2) if sys.argv[1] == "all" else itertools.combinations(
    range(0, len(paths), {seeds}), 2)
for a, b in pairs:
    for metric in scores[a]:
        stats.paired_difference(scores[a][metric], scores[b][metric])
"""


def _evaluate(correct: np.ndarray, nll: np.ndarray, output_path: str) -> dict:
    from marin.evaluation import stats
    from marin.evaluation.perplexity import DocumentScore, summarize
    from marin.evaluation.results import (
        Aggregation,
        DocumentItems,
        EvaluationItems,
        EvaluationResults,
        ItemRecord,
        MetricResult,
        Perplexity,
    )

    ids = [f"{i}:item" for i in range(correct.shape[1])]
    docs = [f"{i}:doc" for i in range(len(nll))]
    tasks = {f"task{t}": correct[t] for t in range(correct.shape[0])}
    results = EvaluationResults(
        perplexity=Perplexity.of(
            summarize([DocumentScore("d", "d", float(x), 10, 40) for x in nll], iters=100)
        ),
        harness={
            t: {"acc": MetricResult.named(stats.accuracy(v), "acc", Aggregation.MEAN)}
            for t, v in tasks.items()
        },
    )
    items = EvaluationItems(
        perplexity={
            "d": DocumentItems(ids=docs, nll=nll.tolist(), tokens=[10] * len(docs), bytes=[40] * len(docs))
        },
        harness={t: {"acc": ItemRecord(ids=ids, values=v.tolist())} for t, v in tasks.items()},
    )
    Path(output_path, "results.json").write_bytes(results.to_bytes())
    Path(output_path, "items.json").write_bytes(items.to_bytes())
    return {}


def _train(output_path: str) -> dict:
    return {}


def build(prefix: Path, items: int) -> list[str]:
    """The 20 evaluations (4 configurations x 5 seeds), their output folders in configuration order."""
    from marin.execution.step_runner import StepRunner
    from marin.execution.step_spec import StepSpec

    rng = np.random.default_rng(0)
    difficulty = rng.normal(0, 1.5, (TASKS, items))
    base = rng.uniform(20, 40, items)
    evals = []
    for c in range(CONFIGURATIONS):
        for s in range(SEEDS):
            logit = difficulty + 0.1 * c + rng.normal(0, 0.1)
            correct = (rng.random((TASKS, items)) < 1 / (1 + np.exp(-logit))).astype(np.float64)
            nll = base * (1 - 0.02 * c + rng.normal(0, 0.01)) + rng.normal(0, 0.5, items)
            model = StepSpec(f"checkpoints/c{c}-seed{s}", _train, hash_attrs={"config": c, "seed": s})
            evals.append(
                StepSpec(
                    f"evaluations/c{c}-seed{s}",
                    functools.partial(_evaluate, correct, nll),
                    deps=[model],
                    hash_attrs={"model": {"step": model.name}},
                )
            )
    result = StepRunner(prefix=str(prefix), progress=False).run(evals)
    return [result.output_path(spec) for spec in evals]


def _timed(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{command[:3]} exited {done.returncode}: {done.stderr[-3000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument(
        "--all-pairs",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="time paired_all_pairs (once)",
    )
    args = parser.parse_args()
    prefix = Path(tempfile.mkdtemp(prefix="compare-bench-"))
    try:
        paths = build(prefix, args.items)
        threads = {k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
        env = user_environment(threads)
        one_core = ["taskset", "-c", "0"] if shutil.which("taskset") else []
        marin = str(Path(sys.executable).parent / "marin")
        script = PAIRED.format(seeds=SEEDS)
        commands = {
            "compare": [*one_core, marin, "compare", *paths],
            "paired": [*one_core, sys.executable, "-c", script, "configurations", *paths],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for round_ in range(args.rounds):
            for name, command in commands.items():
                times[name].append(_timed(command, env))
            if args.all_pairs and round_ == 0:  # a minute of the old behaviour: once is enough to see it
                times["paired_all_pairs"] = [
                    _timed([*one_core, sys.executable, "-c", script, "all", *paths], env)
                ]
        best = {name: min(values) for name, values in times.items()}
        goals = {
            "compare_s <= 2": best["compare"] <= 2,
            "compare_over_paired <= 3": best["compare"] / best["paired"] <= 3,
        }
        print(
            json.dumps(
                {
                    "benchmark": "compare_replicates",
                    "workload": f"{CONFIGURATIONS} configurations x {SEEDS} seeds, 5 metrics, {args.items} items, "
                    "1,000 resamples, fresh interpreter on one core",
                    "compare_s": round(best["compare"], 3),
                    "paired_s": round(best["paired"], 3),
                    "paired_all_pairs_s": round(best["paired_all_pairs"], 3) if args.all_pairs else None,
                    "compare_over_paired": round(best["compare"] / best["paired"], 3),
                    "compare_over_paired_all_pairs": (
                        round(best["compare"] / best["paired_all_pairs"], 3) if args.all_pairs else None
                    ),
                    "goals": goals,
                    "meets_goals": all(goals.values()),
                    "rounds": {name: [round(t, 3) for t in values] for name, values in times.items()},
                    "one_core": bool(one_core),
                    "load_average": load_average(),
                }
            )
        )
    finally:
        shutil.rmtree(prefix, ignore_errors=True)


if __name__ == "__main__":
    main()
