"""A sweep report: a table (Markdown and CSV) and a PNG plot of eval metrics against training tokens.

It reads the `metrics.jsonl` of each trained model (records holding `tokens` and eval metrics such
as `eval_loss`, `eval_bpb`), or the checkpoint curve of each evaluation (`evaluate(...,
checkpoints="all")`: each metric with its interval at each export, drawn as a band), and compares
the runs of, say, a learning-rate sweep. The step body,
`run_sweep_report`, finds each train step's output through `marin.execution.context.current()`.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from typing import ClassVar

import storage
from marin.evaluation.direction import best
from marin.evaluation.errors import EvalDataError
from marin.evaluation.results import RESULTS_FILE, EvaluationResults, decode_results
from marin.execution.context import current

TABLE_MD = "table.md"
TABLE_CSV = "table.csv"
PLOT_PNG = "plot.png"


@dataclass(frozen=True)
class SweepReportConfig:
    """The runs to compare as `(label, train step name)` pairs, the metrics and the x axis. Each metric's
    best is the lowest or the highest value, as `direction.higher_is_better` says for its name."""

    # keyed even at their defaults: these keys were published before defaults stayed out (marin.execution.keyed)
    KEYED_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("metrics", "x_key")

    runs: tuple[tuple[str, str], ...]
    metrics: tuple[str, ...] = ("eval_loss", "eval_bpb")
    x_key: str = "tokens"


def read_eval_curve(step_name: str, output_path: str, metrics: tuple[str, ...], x_key: str) -> list[dict]:
    """A run's eval metrics against `x_key`: the records of a train step's `metrics.jsonl` that carry
    one, or the checkpoint curve of an evaluation step (`evaluate(..., checkpoints=...)`), whose
    points hold each metric's value (and its interval under `<metric>_ci95`) at each export."""
    results = storage.read_bytes(storage.join(output_path, RESULTS_FILE))
    if results is not None:
        return _checkpoint_curve(step_name, decode_results(results, output_path), metrics, x_key)
    records = storage.read_records(storage.join(output_path, "metrics.jsonl"))
    if not records:
        raise EvalDataError(f"train step {step_name!r} has no metrics.jsonl at {output_path}: has it run?")
    curve = []
    for record in records:
        if any(isinstance(record.get(m), (int, float)) for m in metrics) and x_key in record:
            curve.append({x_key: record[x_key], **{m: record[m] for m in metrics if m in record}})
    if not curve:
        raise EvalDataError(
            f"train step {step_name!r}: metrics.jsonl has no record with {x_key!r} and any of {list(metrics)}; "
            "train with steps_per_eval set, or name the metrics it logs"
        )
    return curve


def _checkpoint_curve(
    step_name: str, results: EvaluationResults, metrics: tuple[str, ...], x_key: str
) -> list[dict]:
    curves = results.checkpoints.curves if results.checkpoints is not None else {}
    found = [m for m in metrics if m in curves]
    if not found:
        raise EvalDataError(
            f"evaluation {step_name!r} has no checkpoint curve of {list(metrics)}; evaluate with "
            f"checkpoints='all' and name metrics it has: {sorted(curves)[:8]}"
        )
    by_x: dict = {}
    for metric in found:
        for point in curves[metric]:
            x = getattr(point, x_key, None) or point.step
            row = by_x.setdefault(x, {x_key: x})
            row[metric] = point.value
            row[f"{metric}_ci95"] = list(point.ci95) if point.ci95 else None
    return [by_x[x] for x in sorted(by_x)]


def summary_rows(config: SweepReportConfig, curves: dict[str, list[dict]]) -> list[dict]:
    """One row per run: its step, final tokens, and the final and best value of each metric (the best by
    the metric's direction: the highest accuracy, the lowest loss)."""
    rows = []
    for label, step in config.runs:
        curve = curves[label]
        row = {"run": label, "step": step, config.x_key: curve[-1][config.x_key]}
        for metric in config.metrics:
            values = [r[metric] for r in curve if metric in r and math.isfinite(r[metric])]
            row[f"final_{metric}"] = values[-1] if values else None
            row[f"best_{metric}"] = best(values, metric) if values else None
        rows.append(row)
    return rows


def markdown_table(rows: list[dict]) -> str:
    """`rows` as a Markdown table, numbers to 4 significant digits."""
    columns = list(rows[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(_cell(row[c]) for c in columns) + " |")
    return "\n".join(lines) + "\n"


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def curves_csv(config: SweepReportConfig, curves: dict[str, list[dict]]) -> str:
    """Every eval record of every run, long format: run, x, metrics."""
    lines = [",".join(["run", config.x_key, *config.metrics])]
    for label, _ in config.runs:
        for record in curves[label]:
            values = (repr(record[m]) if m in record else "" for m in config.metrics)
            lines.append(",".join([label, str(record[config.x_key]), *values]))
    return "\n".join(lines) + "\n"


def plot_png(config: SweepReportConfig, curves: dict[str, list[dict]]) -> bytes:
    """One panel per metric, one line per run, metric against `x_key`; PNG bytes."""
    try:
        import matplotlib
    except ImportError as e:
        raise EvalDataError(
            f"a sweep report draws plot.png with matplotlib: pip install 'marin[plot]' ({e})"
        ) from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(config.metrics), figsize=(5 * len(config.metrics), 4), squeeze=False)
    for ax, metric in zip(axes[0], config.metrics, strict=True):
        for label, _ in config.runs:
            points = [
                (r[config.x_key], r[metric], r.get(f"{metric}_ci95")) for r in curves[label] if metric in r
            ]
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
            bands = [p for p in points if p[2]]
            if bands:  # an evaluation's checkpoint curve: each point's 95% interval as a band
                ax.fill_between(
                    [p[0] for p in bands], [p[2][0] for p in bands], [p[2][1] for p in bands], alpha=0.2
                )
        ax.set_xlabel(f"training {config.x_key}")
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()


def run_sweep_report(config: SweepReportConfig, output_path: str) -> dict:
    """Write `table.md`, `table.csv` and `plot.png` under `output_path`; return the artifact."""
    ctx = current()
    curves = {
        label: read_eval_curve(step, ctx.path_of(step), config.metrics, config.x_key)
        for label, step in config.runs
    }
    rows = summary_rows(config, curves)
    storage.write_atomic(storage.join(output_path, TABLE_MD), markdown_table(rows).encode())
    storage.write_atomic(storage.join(output_path, TABLE_CSV), curves_csv(config, curves).encode())
    storage.write_atomic(storage.join(output_path, PLOT_PNG), plot_png(config, curves))
    first = config.metrics[0]
    ranked = [r for r in rows if r[f"final_{first}"] is not None]
    artifact = {"table_path": TABLE_MD, "csv_path": TABLE_CSV, "plot_path": PLOT_PNG, "runs": rows}
    if ranked:
        value = best((r[f"final_{first}"] for r in ranked), first)
        top = next(r for r in ranked if r[f"final_{first}"] == value)
        artifact["headline"] = {"metric": f"final_{first}", "value": top[f"final_{first}"], "run": top["run"]}
    return artifact
