"""A prefix holding a real scaling fit: steps that write what train and evaluation steps write, with
values from a known law, and two fits over them, run by the real StepRunner (in threads).

A train-like step writes a `metrics.jsonl` whose last record holds `eval_bpb`; an evaluation-like
step returns a result whose metrics are `{"value", "stderr", "ci95", "n"}` objects.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fray.cluster import ThreadCluster
from marin.execution.lazy import lower
from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec
from marin.experiment.scaling import SweepRun, scaling_fit
from marin.scaling_laws.flops import BudgetRun
from tests.marin.scaling_laws.synthetic import isoflop_design, law_loss, noisy


def write_train_record(value: float, output_path: str) -> dict:
    """What a train step leaves for a fit: metrics.jsonl whose last record holds the validation figures."""
    records = [{"step": 1, "loss": value + 1.0}, {"step": 2, "loss": value + 0.1, "eval_bpb": value}]
    Path(output_path, "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return {"final_eval_bpb": value}


def evaluation_result(value: float) -> dict:
    """What an evaluation step returns once its metrics carry intervals."""
    return {
        "micro": {"bpb": {"value": value, "stderr": 0.01, "ci95": [value - 0.02, value + 0.02], "n": 100}}
    }


@dataclass(frozen=True)
class FitOutputs:
    """The prefix, its runner, the runs, their values, and the output folders of the two fits."""

    prefix: Path
    runner: StepRunner
    runs: list[SweepRun]
    values: np.ndarray
    train_fit: Path  # metric eval_bpb, with plots
    eval_fit: Path  # metric micro/bpb, without plots


def build_fit_outputs(prefix: Path) -> FitOutputs:
    """3 budgets x 4 sizes of steps holding noisy values of a known law, and the two fits over them."""
    budgets, params, tokens = isoflop_design(budgets=3, sizes=4)
    values = noisy(law_loss(params, tokens), seed=0)
    runs = []
    for i, (c, n, d) in enumerate(zip(budgets, params, tokens, strict=True)):
        value = float(values[i])
        train = StepSpec(
            name=f"runs/r{i}", fn=functools.partial(write_train_record, value), hash_attrs={"i": i}
        )
        evaluation = StepSpec(
            name=f"runs/r{i}-eval",
            fn=functools.partial(evaluation_result, value * 0.9),
            deps=[train],
            hash_attrs={"i": i},
        )
        shape = BudgetRun(budget=c, params=int(n), flops_per_token=c / d, steps=1, tokens=int(d), flops=c)
        runs.append(SweepRun(budget=c, size=i, shape=shape, train=train, evaluation=evaluation))
    runner = StepRunner(prefix=str(prefix), cluster=ThreadCluster(), progress=False)
    fits = [
        scaling_fit("fits/train", runs, bootstrap=100),
        scaling_fit("fits/eval", runs, metric="micro/bpb", bootstrap=100, plots=False),
    ]
    result = runner.run(fits)
    train_fit, eval_fit = (Path(result.output_path(lower(f))) for f in fits)
    return FitOutputs(prefix, runner, runs, values, train_fit, eval_fit)
