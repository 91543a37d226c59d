"""`marin compare`'s output: Markdown tables (with what each can conclude said in words), long CSV, JSON."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson

from marin.evaluation.comparison import Comparison, Difference, Group, Kind
from marin.evaluation.errors import EvalDataError
from marin.evaluation.results import MetricResult

COMPUTE_ROWS = (("model FLOPs", "model"), ("hardware FLOPs", "hardware"), ("model / hardware FLOPs", "ratio"))
"""The rows of the model step's compute: its model FLOPs, its hardware FLOPs and their ratio."""


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
    sections = [_overview(comparison)]
    by_kind = {kind: [d for d in comparison.differences if d.kind == kind] for kind in Kind}
    tests = sum(1 for d in comparison.differences if d.p_value is not None)
    plural = "s" if tests != 1 else ""
    adjusted = f"adjusted for the {tests} test{plural} of this table by {comparison.adjustment.describe()}"
    if by_kind[Kind.CONFIGURATION]:
        sections.append(
            "Differences between configurations (a - b: the mean over a's seeds minus b's; 95% interval "
            "counting seed and item noise; p: a t test on the Welch-Satterthwaite degrees of freedom, "
            f"{adjusted}; better: where the adjusted p < 0.05, higher or lower as the metric says)\n\n"
            + _differences(by_kind[Kind.CONFIGURATION], "better")
        )
    if by_kind[Kind.MODEL]:
        sections.append(
            f"Differences between these models (a - b on the same items; p {adjusted}; better model: where "
            "the adjusted p < 0.05, the better of these two trained models, not of their configurations)\n\n"
            + _differences(by_kind[Kind.MODEL], "better model")
        )
    if by_kind[Kind.SEED_NOISE]:
        sections.append(
            "Seed noise (a - b between replicates of one configuration, on the same items: what a reseed "
            "changes, not an effect)\n\n" + _seed_noise(by_kind[Kind.SEED_NOISE])
        )
    if comparison.notes:
        sections.append("\n".join(f"- {note}" for note in comparison.notes) + "\n")
    if comparison.signal:
        sections.append(_signal(comparison))
    if comparison.power:
        sections.append(_power(comparison))
    return "\n".join(sections)


def _overview(comparison: Comparison) -> str:
    """Parameters that differ, compute, and each metric per column (configuration means when replicated)."""
    columns = (
        comparison.groups if comparison.replicated else [Group(e.label, (e,)) for e in comparison.evaluations]
    )
    lines = [_row(["", *comparison.columns]), _row(["---"] * (len(columns) + 1))]
    for name, values in comparison.params.items():
        lines.append(_row([name, *(_cell(v) for v in values)]))
    if any(m.flops for g in columns for m in g.members):
        for name, key in COMPUTE_ROWS:
            lines.append(_row([name, *(_compute_cell(g, key) for g in columns)]))
    rows = {(r.configuration, r.metric): r for r in comparison.configuration_metrics}
    for metric in comparison.metrics:
        if comparison.replicated:
            cells = [_configuration_cell(rows.get((g.label, metric))) for g in columns]
        else:
            cells = [interval(g.members[0].metrics.get(metric)) for g in columns]
        lines.append(_row([metric, *cells]))
    out = "\n".join(lines) + "\n"
    if comparison.replicated:
        out = (
            "Configurations (each cell: the mean over its seeds [95% interval counting seed and item noise], "
            "the seeds' standard deviation, seeds x items)\n\n" + out
        )
    return out


def _configuration_cell(row) -> str:
    if row is None:
        return ""
    ci = f" [{number(row.ci95[0])}, {number(row.ci95[1])}]" if row.ci95 else ""
    spread = {
        "measured": f" sd {number(row.seed_sd)}",
        "borrowed": " (seed sd borrowed)",
        "unmeasured": " (seed noise unmeasured)",
    }[row.seed_noise]
    return f"{number(row.value)}{ci}{spread} n={row.seeds}x{row.items}"


def _differences(differences: Sequence[Difference], better: str) -> str:
    header = ["metric", "a", "b", "a - b", "95% interval", "p", "p adjusted", "test", better]
    lines = [_row(header), _row(["---"] * len(header))]
    for d in differences:
        lines.append(
            _row(
                [
                    d.metric,
                    d.a,
                    d.b,
                    number(d.value),
                    _span(d.ci95),
                    _p(d.p_value),
                    _p(d.p_adjusted),
                    d.test + (f" (df {d.df:.3g})" if d.df is not None else ""),
                    d.better or "",
                ]
            )
        )
    return "\n".join(lines) + "\n"


def _seed_noise(differences: Sequence[Difference]) -> str:
    header = ["metric", "a", "b", "a - b", "95% interval (items)"]
    lines = [_row(header), _row(["---"] * len(header))]
    for d in differences:
        lines.append(_row([d.metric, d.a, d.b, number(d.value), _span(d.ci95)]))
    return "\n".join(lines) + "\n"


def _signal(comparison: Comparison) -> str:
    what = "configurations" if comparison.replicated else "models"
    lines = [
        f"Which metrics can tell these {what} apart (signal: (max - min) / |mean| over them; noise: the "
        "training noise of one, the seeds' standard deviation (else its last checkpoints') over |mean|; "
        "Heineman et al. 2025)",
        "",
        _row(["metric", "signal", "noise", "noise from", "signal / noise", "verdict"]),
        _row(["---"] * 6),
    ]
    for s in comparison.signal:
        lines.append(
            _row([s.metric, _pct(s.signal), _pct(s.noise), s.noise_from, number(s.snr), s.verdict()])
        )
    return "\n".join(lines) + "\n"


def _power(comparison: Comparison) -> str:
    delta = comparison.power[0].delta
    lines = [
        f"Power against a difference of {number(delta)} (80%, two-sided, alpha 0.05): the seeds per "
        "configuration it needs at these items, and the items it needs at the seeds compared "
        "(sd: seed effect; item noise: which items one model gets right, per item; interaction: how two "
        "configurations differ item by item)",
        "",
        _row(
            [
                "metric",
                "seed sd",
                "item noise sd",
                "interaction sd",
                "items",
                "seeds",
                "power now",
                "seeds needed",
                "items needed",
            ]
        ),
        _row(["---"] * 9),
    ]
    for p in comparison.power:
        lines.append(
            _row(
                [
                    p.metric,
                    number(p.seed_sd),
                    number(p.noise_sd),
                    number(p.interaction_sd),
                    str(p.items),
                    str(p.seeds),
                    f"{p.power_now:.0%}",
                    str(p.seeds_needed) if p.seeds_needed else "none suffices: score more items",
                    f"{p.items_needed:,}"
                    if p.items_needed
                    else f"none suffices with {p.seeds} seeds: add seeds",
                ]
            )
        )
    return "\n".join(lines) + "\n"


def _span(ci) -> str:
    return f"[{number(ci[0])}, {number(ci[1])}]" if ci else ""


def _p(p: float | None) -> str:
    return "" if p is None else f"{p:.3g}"


def _pct(x: float | None) -> str:
    return "" if x is None else f"{x:.2%}"


def _compute_cell(group: Group, key: str) -> str:
    values = [m.flops.get(key) for m in group.members]
    values = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not values:
        return ""
    value = float(np.mean(values))
    return f"{value:.2%}" if key == "ratio" else f"{value:.3g}"


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def _cell(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return orjson.dumps(value).decode()
    return number(value) if isinstance(value, float) else ("" if value is None else str(value))


_CSV_COLUMNS = (
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
    "p_adjusted",
    "significant",
    "better",
    "test",
    "df",
    "seeds",
    "seed_sd",
)


def _csv(comparison: Comparison) -> str:
    """Long format: one row per parameter value, compute figure, metric, configuration mean, difference,
    signal-to-noise and power figure."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, _CSV_COLUMNS, lineterminator="\n", restval="")
    writer.writeheader()
    columns = comparison.columns
    for name, values in comparison.params.items():
        for column, v in zip(columns, values, strict=True):
            writer.writerow({"kind": "param", "name": name, "evaluation": column, "value": _cell(v)})
    for e in comparison.evaluations:
        for _, key in COMPUTE_ROWS if e.flops else ():
            name = f"{key}_flops" if key != "ratio" else "flops_ratio"
            writer.writerow(
                {"kind": "compute", "name": name, "evaluation": e.label, "value": e.flops.get(key)}
            )
    for metric in comparison.metrics:
        for e in comparison.evaluations:
            m = e.metrics.get(metric)
            if m:
                ci = m.ci95 or (None, None)
                writer.writerow(
                    {
                        "kind": "metric",
                        "name": metric,
                        "evaluation": e.label,
                        "value": m.value,
                        "stderr": m.stderr,
                        "ci95_lo": ci[0],
                        "ci95_hi": ci[1],
                        "n": m.n,
                    }
                )
    for r in comparison.configuration_metrics:
        ci = r.ci95 or (None, None)
        writer.writerow(
            {
                "kind": "configuration",
                "name": r.metric,
                "evaluation": r.configuration,
                "value": r.value,
                "stderr": r.stderr,
                "ci95_lo": ci[0],
                "ci95_hi": ci[1],
                "n": r.items,
                "test": f"seed noise {r.seed_noise}",
                "df": r.df,
                "seeds": r.seeds,
                "seed_sd": r.seed_sd,
            }
        )
    for d in comparison.differences:
        ci = d.ci95 or (None, None)
        writer.writerow(
            {
                "kind": f"difference ({d.kind})",
                "name": d.metric,
                "evaluation": d.a,
                "b": d.b,
                "value": d.value,
                "stderr": d.stderr,
                "ci95_lo": ci[0],
                "ci95_hi": ci[1],
                "n": d.n,
                "p_value": d.p_value,
                "p_adjusted": d.p_adjusted,
                "significant": d.significant if d.p_value is not None else "",
                "better": d.better or "",
                "test": d.test,
                "df": d.df,
            }
        )
    for s in comparison.signal:
        writer.writerow({"kind": "signal_to_noise", "name": s.metric, "value": s.snr, "test": s.verdict()})
    for p in comparison.power:
        writer.writerow(
            {
                "kind": "power",
                "name": p.metric,
                "value": p.seeds_needed,
                "n": p.items_needed,
                "seeds": p.seeds,
                "seed_sd": p.seed_sd,
            }
        )
    return buffer.getvalue()
