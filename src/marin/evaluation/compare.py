"""`marin compare`: evaluations side by side, with their intervals and paired differences.

Like `dvc exp show`, the table shows only what differs between the runs compared: the parameters
from each evaluation's key record and its model step's (`.executor_info`'s `hash_attrs`), the model
step's compute when it records one (model FLOPs, hardware FLOPs and their ratio: a train step's
result `flops`, see marin.training.flops), then every headline, suite and task metric with its 95%
interval. For each pair of evaluations that scored the
same items (same ids in `items.json`), each metric's paired difference (first minus second), its
paired 95% interval, its p-value (McNemar's exact test for accuracies, the paired bootstrap otherwise)
and whether the interval excludes 0.

An argument is an evaluation's output folder, or a step name, which stands for its latest
successful output under the prefix.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

import storage
from marin.evaluation import stats
from marin.evaluation.direction import ranking_value
from marin.evaluation.errors import EvalDataError
from marin.evaluation.results import RESULTS_FILE, MetricResult, read_items, read_results
from marin.execution.artifact import read_artifact, read_info
from marin.execution.states import OutputState


@dataclass(frozen=True)
class Evaluated:
    """One evaluation read back: its label, where it is, its parameters, metrics and per-item scores."""

    label: str
    path: str
    params: dict[str, Any]
    metrics: dict[str, MetricResult]  # by flat name (`EvaluationResults.flat_metrics`)
    items: dict[str, stats.ItemScores] = field(default_factory=dict)
    flops: dict[str, Any] = field(default_factory=dict)  # the model step's result `flops`, if any


@dataclass(frozen=True)
class Comparison:
    """What `marin compare` shows: the evaluations, their differing parameters, metrics and paired differences."""

    evaluations: list[Evaluated]
    params: dict[str, list[Any]]  # only those that differ
    metrics: list[str]
    differences: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {
            "evaluations": [{"label": e.label, "path": e.path} for e in self.evaluations],
            "params": self.params,
            "compute": {e.label: e.flops or None for e in self.evaluations},
            "metrics": {
                m: {e.label: e.metrics[m].to_json() if m in e.metrics else None for e in self.evaluations}
                for m in self.metrics
            },
            "differences": self.differences,
        }


def resolve(argument: str, prefix: str) -> str:
    """The output folder an argument names: the folder itself, or the latest SUCCESS output of that step name."""
    if storage.exists(storage.join(argument, RESULTS_FILE)):
        return argument
    from marin.execution.explain import list_outputs

    found = [
        r
        for r in list_outputs(prefix)
        if r.name == argument
        and r.state == OutputState.SUCCESS
        and storage.exists(storage.join(r.path, RESULTS_FILE))
    ]
    if not found:
        raise EvalDataError(
            f"{argument!r} is neither an evaluation's output folder (with {RESULTS_FILE}) nor the name of an "
            f"evaluation step with a finished output under {prefix}; pass the folder, or --prefix where it ran"
        )
    return min(found, key=lambda r: r.age_s if r.age_s is not None else math.inf).path


def read_evaluation(path: str) -> Evaluated:
    """An evaluation's metrics, parameters and per-item scores, from its output folder."""
    results = read_results(path)
    items = read_items(path)
    info = read_info(path)
    hash_attrs = (info.hash_attrs if info is not None else None) or {}
    params = {f"eval.{k}": v for k, v in _flatten(hash_attrs).items()}
    model_step = (
        (hash_attrs.get("model") or {}).get("step") if isinstance(hash_attrs.get("model"), dict) else None
    )
    flops: dict[str, Any] = {}
    for dep in info.deps if info is not None else ():
        if dep.name == model_step:
            flops = _flops_of(dep.path)
        dep_info = read_info(dep.path)
        if dep_info is not None and dep_info.hash_attrs:
            role = (
                "model" if dep.name == model_step else dep.name
            )  # the model's parameters line up across runs
            params.update({f"{role}.{k}": v for k, v in _flatten(dep_info.hash_attrs).items()})
    return Evaluated(
        storage.basename(path.rstrip("/")), path, params, results.flat_metrics(), items.scores(), flops
    )


def _flops_of(model_path: str) -> dict[str, Any]:
    """A train step's `flops` (model, hardware, ratio), from its result; empty when it records none."""
    artifact = read_artifact(model_path)
    result = artifact.result if artifact is not None else None
    flops = result.get("flops") if isinstance(result, dict) else None
    return dict(flops) if isinstance(flops, dict) else {}


def compare(paths: Sequence[str], iters: int = stats.ITERS, seed: int = stats.SEED) -> Comparison:
    """Read each evaluation and pair every two on the metrics whose items they share."""
    evaluations = [read_evaluation(p) for p in paths]
    labels = [e.label for e in evaluations]
    if len(set(labels)) != len(labels):
        evaluations = [dataclasses.replace(e, label=f"{e.label}#{i}") for i, e in enumerate(evaluations)]
    keys = list(dict.fromkeys(k for e in evaluations for k in e.params))
    params = {
        k: [e.params.get(k) for e in evaluations]
        for k in keys
        if len({orjson.dumps(e.params.get(k), option=orjson.OPT_SORT_KEYS) for e in evaluations}) > 1
    }
    metrics = list(dict.fromkeys(m for e in evaluations for m in e.metrics))
    differences = []
    for a, b in itertools.combinations(evaluations, 2):
        for metric in metrics:
            x, y = a.items.get(metric), b.items.get(metric)
            if x is None or y is None or set(x.ids) != set(y.ids):
                continue
            diff = stats.paired_difference(x, y, iters, seed)
            # the better of the two where the difference is significant, by the metric's direction
            better = None
            if diff.significant:
                better = (a if (diff.difference.value > 0) == a.metrics[metric].higher_is_better else b).label
            differences.append(
                {"a": a.label, "b": b.label, "metric": metric, **diff.to_json(), "better": better}
            )
    return Comparison(evaluations, params, metrics, differences)


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for k, v in data.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    if isinstance(data, list) and any(isinstance(v, (dict, list)) for v in data):
        out = {}
        for i, v in enumerate(data):
            out.update(_flatten(v, f"{prefix}{i}."))
        return out
    return {prefix.rstrip("."): data}


# --- rendering ----------------------------------------------------------------------------------


def number(x: Any) -> str:
    """A figure to 4 significant digits (blank for a missing one)."""
    if x is None:
        return ""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return str(x)
    if isinstance(x, int):
        return str(x)
    return "nan" if not math.isfinite(x) else f"{x:.4g}"


def interval(metric: MetricResult | dict | None) -> str:
    """`0.4120 [0.3710, 0.4550] n=500` for a metric (a `MetricResult`, or its JSON as a headline holds it)."""
    if not metric:
        return ""
    if isinstance(metric, MetricResult):
        metric = metric.to_json()
    ci = metric.get("ci95")
    span = f" [{number(ci[0])}, {number(ci[1])}]" if ci else ""
    return f"{number(metric.get('value'))}{span} n={metric.get('n')}"


def render(comparison: Comparison, fmt: str = "md") -> str:
    """The comparison as Markdown tables, CSV (long format) or JSON."""
    if fmt == "json":
        return orjson.dumps(
            comparison.to_json(), option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY
        ).decode()
    if fmt == "csv":
        return _csv(comparison)
    if fmt != "md":
        raise EvalDataError(f"--format {fmt!r}: use md, csv or json")
    labels = [e.label for e in comparison.evaluations]
    lines = [_row(["", *labels]), _row(["---"] * (len(labels) + 1))]
    for name, values in comparison.params.items():
        lines.append(_row([name, *(_cell(v) for v in values)]))
    for name, key in COMPUTE_ROWS:
        if any(e.flops for e in comparison.evaluations):
            lines.append(_row([name, *(_compute_cell(e.flops, key) for e in comparison.evaluations)]))
    for metric in comparison.metrics:
        lines.append(_row([metric, *(interval(e.metrics.get(metric)) for e in comparison.evaluations)]))
    out = "\n".join(lines) + "\n"
    if comparison.differences:
        out += (
            "\nPaired differences (a - b on the same items; significant: the 95% interval excludes 0; "
            "better: the better of a and b where significant, higher or lower as the metric says)\n\n"
        )
        out += (
            _row(["metric", "a", "b", "a - b", "95% interval", "p", "test", "significant", "better"]) + "\n"
        )
        out += _row(["---"] * 9) + "\n"
        for d in comparison.differences:
            ci = d["ci95"]
            out += (
                _row(
                    [
                        d["metric"],
                        d["a"],
                        d["b"],
                        number(d["value"]),
                        f"[{number(ci[0])}, {number(ci[1])}]" if ci else "",
                        f"{d['p_value']:.3g}",
                        d["test"],
                        "yes" if d["significant"] else "no",
                        d["better"] or "",
                    ]
                )
                + "\n"
            )
    return out


COMPUTE_ROWS = (("model FLOPs", "model"), ("hardware FLOPs", "hardware"), ("model / hardware FLOPs", "ratio"))
"""The rows of the model step's compute: its model FLOPs, its hardware FLOPs and their ratio."""


def _compute_cell(flops: dict[str, Any], key: str) -> str:
    value = flops.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return ""
    return f"{value:.2%}" if key == "ratio" else f"{value:.3g}"


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def _cell(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return orjson.dumps(value).decode()
    return number(value) if isinstance(value, float) else ("" if value is None else str(value))


def _csv(comparison: Comparison) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(
        [
            "kind",
            "name",
            "evaluation",
            "b",
            "value",
            "stderr",
            "ci95_lo",
            "ci95_hi",
            "n",
            "p_value",
            "significant",
            "better",
        ]
    )
    for name, values in comparison.params.items():
        for e, v in zip(comparison.evaluations, values, strict=True):
            writer.writerow(["param", name, e.label, "", _cell(v), "", "", "", "", "", "", ""])
    for e in comparison.evaluations:
        for _, key in COMPUTE_ROWS if e.flops else ():
            writer.writerow(
                [
                    "compute",
                    f"{key}_flops" if key != "ratio" else "flops_ratio",
                    e.label,
                    "",
                    e.flops.get(key),
                    "",
                    "",
                    "",
                    "",
                    "",
                    "",
                    "",
                ]
            )
    for metric in comparison.metrics:
        for e in comparison.evaluations:
            m = e.metrics.get(metric)
            if m:
                ci = m.ci95 or (None, None)
                writer.writerow(
                    [
                        "metric",
                        metric,
                        e.label,
                        "",
                        m.value,
                        m.stderr,
                        ci[0],
                        ci[1],
                        m.n,
                        "",
                        "",
                        "",
                    ]
                )
    for d in comparison.differences:
        ci = d["ci95"] or [None, None]
        writer.writerow(
            [
                "difference",
                d["metric"],
                d["a"],
                d["b"],
                d["value"],
                d["stderr"],
                ci[0],
                ci[1],
                d["n"],
                d["p_value"],
                d["significant"],
                d["better"] or "",
            ]
        )
    return buffer.getvalue()


def ranked(evaluations: Sequence[Evaluated], metric: str) -> list[Evaluated]:
    """The evaluations that have `metric`, best first by the worse end of its interval (the lower bound
    when higher is better, the upper bound when lower is: `direction.ranking_value`), so a model
    ranks high only when it is good with confidence."""
    have = [e for e in evaluations if metric in e.metrics]
    return sorted(have, key=lambda e: ranking_value(e.metrics[metric], metric), reverse=True)
