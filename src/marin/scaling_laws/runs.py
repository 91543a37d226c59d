"""The runs a scaling fit rests on, and how their metric is read from the steps' records.

A `ScalingRun` is one trained model of a sweep: its train step (and evaluation step, if any), the
compute budget it was trained for, its parameters N, tokens D and model FLOPs C. The metric of a
run is looked up, in order:

1. in its evaluation's result (`.artifact.json`), as a path of keys joined by "/", e.g.
   `micro/bpb`, `bpb/stories` or `harness/marin_story_endings/acc`: an evaluation's metric is an
   object `{"value", "stderr", "ci95", "n"}` (`metric_value` reads it);
2. in its train step's `metrics.jsonl`: the last record that holds the key as a number, e.g.
   `eval_bpb`, `eval_loss` (the validation figures at the end of training), `loss`, or an in-loop
   harness metric `<task>/<metric>`, whose standard error the record holds beside it as
   `<task>/<metric>_stderr` (`record_value` reads both).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import storage
from marin.execution.artifact import read_artifact
from marin.scaling_laws.errors import ScalingLawError
from marin.scaling_laws.isoflop import budget_groups
from marin.scaling_laws.loss_law import MIN_POINTS
from marin.scaling_laws.points import positive_array

METRICS_FILE = "metrics.jsonl"


@dataclass(frozen=True)
class ScalingRun:
    """One run of a sweep: which steps hold it, and its budget, parameters, tokens and model FLOPs."""

    train_step: str
    budget: float
    params: int
    tokens: int
    flops: float
    evaluation_step: str | None = None

    @property
    def label(self) -> str:
        """How tables and errors name the run: its evaluation step if it has one, else its train step."""
        return self.evaluation_step or self.train_step


@dataclass(frozen=True)
class MetricReading:
    """A run's metric: its value, its standard error when the record gives one, and where it was read."""

    value: float
    stderr: float | None
    source: str


def check_runs(runs: Sequence[ScalingRun], where: str) -> None:
    """What can be checked before anything trained: enough runs for Approach 3, positive N, D and C,
    and at least 3 sizes at each of at least 2 budgets for Approach 2. One line names what is wrong."""
    if len(runs) < MIN_POINTS:
        raise ScalingLawError(
            f"{where}: {len(runs)} runs; Approach 3 fits 5 parameters and needs at least {MIN_POINTS} runs"
        )
    labels = [r.label for r in runs]
    for name in ("params", "tokens", "flops", "budget"):
        values = [getattr(r, name) for r in runs]
        try:
            positive_array(values, name, where)
        except ScalingLawError:
            bad = next(
                i
                for i, v in enumerate(values)
                if not (isinstance(v, int | float) and v > 0 and math.isfinite(v))
            )
            raise ScalingLawError(
                f"{where}: run {labels[bad]!r} has {name} = {values[bad]!r}; every run needs a positive N, D, C "
                "and budget"
            ) from None
    budget_groups(
        np.array([r.budget for r in runs]), np.array([r.params for r in runs], dtype=np.float64), where
    )


def metric_value(value: Any) -> tuple[float, float | None] | None:
    """(value, stderr) of an evaluation's metric object `{"value", "stderr", "ci95", "n"}`; None otherwise."""
    if isinstance(value, Mapping) and "value" in value and "n" in value:
        number, stderr = value["value"], value.get("stderr")
        if number is None:  # a metric object writes NaN as null
            number = math.nan
        if isinstance(number, bool) or not isinstance(number, int | float):
            return None
        return float(number), float(stderr) if isinstance(stderr, int | float) else None
    return None


def record_value(record: Mapping[str, Any], key: str) -> tuple[float, float | None] | None:
    """(value, stderr) of `key` in a `metrics.jsonl` record: a number, with `<key>_stderr` beside it if any."""
    value, stderr = record.get(key), record.get(f"{key}_stderr")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value), float(stderr) if isinstance(stderr, int | float) and not isinstance(
        stderr, bool
    ) else None


def read_run_metric(run: ScalingRun, metric: str, path_of: Callable[[str], str]) -> MetricReading:
    """The run's `metric`, from its evaluation's result or its train step's metrics (see the module docstring)."""
    looked = []
    if run.evaluation_step is not None:
        path = path_of(run.evaluation_step)
        artifact = read_artifact(path)
        result = artifact.result if artifact is not None else None
        found = _at_path(result, metric)
        if found is not None:
            return MetricReading(*found, source=f"{run.evaluation_step}: result {metric}")
        looked.append(f"the result of {run.evaluation_step!r} ({_keys(result)})")
    path = path_of(run.train_step)
    records = storage.read_records(storage.join(path, METRICS_FILE))
    for record in reversed(records):
        found = record_value(record, metric)
        if found is not None:
            return MetricReading(*found, source=f"{run.train_step}: {METRICS_FILE} step {record.get('step')}")
    logged = sorted({k for r in records for k in r if record_value(r, k) is not None})
    looked.append(f"{METRICS_FILE} of {run.train_step!r} (it logs {', '.join(logged) or 'nothing'})")
    raise ScalingLawError(
        f"run {run.label!r} has no metric {metric!r}: looked in {' and in '.join(looked)}; "
        "name a metric every run records"
    )


def checked_reading(run: ScalingRun, metric: str, reading: MetricReading) -> float:
    """The reading's value, which must be a positive finite number (a loss-like metric)."""
    if not (math.isfinite(reading.value) and reading.value > 0):
        raise ScalingLawError(
            f"run {run.label!r}: {metric} = {reading.value!r} ({reading.source}); a scaling law fits a positive, "
            "finite loss-like metric (loss, bits per byte, perplexity, error rate): fix or drop that run"
        )
    return reading.value


def _at_path(result: Any, metric: str) -> tuple[float, float | None] | None:
    node = result
    for key in metric.split("/"):
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return metric_value(node)


def _keys(result: Any) -> str:
    if not isinstance(result, Mapping):
        return "no result"
    return "keys " + ", ".join(sorted(str(k) for k in result))
