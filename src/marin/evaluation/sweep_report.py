"""A sweep report: which setting of a sweep is best, and whether the sweep can tell.

It reads the `metrics.jsonl` of each trained model (records holding `tokens` and eval metrics such as
`eval_loss`, `eval_bpb`, with `<metric>_stderr` where the trainer logs one), or the checkpoint curve
of each evaluation (`evaluate(..., checkpoints="all")`: each metric with its interval at each
export), and compares the settings of, say, a learning-rate sweep.

Runs whose keys differ only in seed fields are replicates of one setting (`marin.evaluation.replicates`,
read from their `.executor_info`; `sweep_report(name, {"lr=1e-3": replicate(model, seeds=...)})`
declares them), and the report is per setting: its final value averaged over seeds with a t interval
over them and their standard deviation. A single run's interval is its own evaluation's (its logged
stderr, or its checkpoint interval), which says nothing of seed noise. The setting with the best final
value of the first metric (by its direction) is named best only when it is separable from the
runner-up (Welch's t test over seeds, p < 0.05; for single runs, their evaluation intervals, with seed
noise unmeasured); otherwise the report says which top settings are indistinguishable.

It writes `table.md` (the verdict, one row per setting, one per run), `table.csv` (every eval record
of every run, long format) and `plot.png` (one panel per metric against training tokens, each
setting's mean with its interval band). The step body, `run_sweep_report`, finds each train step's
output through `marin.execution.context.current()`.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

import storage
from marin.evaluation import configurations
from marin.evaluation.direction import best, higher_is_better
from marin.evaluation.errors import EvalDataError
from marin.evaluation.replicates import configuration_label, configuration_of
from marin.evaluation.results import RESULTS_FILE, EvaluationResults, decode_results
from marin.execution.artifact import read_info
from marin.execution.context import current

TABLE_MD = "table.md"
# The training loop's validation figures, over fixed windows of the token cache: named as such wherever a
# report shows them, since an evaluation's `loss`/`bpb` of the same model (whole documents) differ.
WINDOW_METRICS = ("eval_loss", "eval_bpb")
WINDOW_NOTE = (
    "eval_loss and eval_bpb are the training loop's validation figures over fixed windows of the token "
    "cache; an evaluation's loss and bpb of the same model are over whole documents and differ "
    "(docs/evaluation.md, 'Two losses, two names')."
)


def metric_label(metric: str) -> str:
    """How a report names `metric`: a window figure says it is one."""
    return f"{metric} (windows)" if metric in WINDOW_METRICS else metric


TABLE_CSV = "table.csv"
PLOT_PNG = "plot.png"
Z95 = 1.959963984540054
ALPHA = 0.05


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
    one (with `<metric>_ci95` from a logged `<metric>_stderr`), or the checkpoint curve of an evaluation
    step (`evaluate(..., checkpoints=...)`), whose points hold each metric's value and interval."""
    results = storage.read_bytes(storage.join(output_path, RESULTS_FILE))
    if results is not None:
        return _checkpoint_curve(step_name, decode_results(results, output_path), metrics, x_key)
    records = storage.read_records(storage.join(output_path, "metrics.jsonl"))
    if not records:
        raise EvalDataError(f"train step {step_name!r} has no metrics.jsonl at {output_path}: has it run?")
    curve = []
    for record in records:
        if any(isinstance(record.get(m), (int, float)) for m in metrics) and x_key in record:
            row: dict[str, Any] = {x_key: record[x_key]}
            for m in metrics:
                if m not in record:
                    continue
                row[m] = record[m]
                stderr = record.get(f"{m}_stderr")
                if isinstance(stderr, (int, float)) and math.isfinite(stderr):
                    row[f"{m}_ci95"] = [record[m] - Z95 * stderr, record[m] + Z95 * stderr]
            curve.append(row)
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


@dataclass(frozen=True)
class Setting:
    """One setting of the sweep: its label and its runs (one per seed), and per metric the final value's
    mean over them, its 95% interval, the seeds' standard deviation, and where the interval comes from."""

    label: str
    runs: tuple[str, ...]
    finals: dict[str, list[float]]  # metric -> each run's final value
    intervals: dict[str, list[tuple[float, float] | None]]  # metric -> each run's own final interval

    def mean(self, metric: str) -> float | None:
        values = self.finals.get(metric) or []
        return float(np.mean(values)) if values else None

    def interval(self, metric: str) -> tuple[tuple[float, float] | None, str]:
        """The final value's 95% interval and what it counts: the seeds (t over them), or one run's own
        evaluation noise (seed noise unmeasured), or nothing logged."""
        values = self.finals.get(metric) or []
        if len(values) > 1:
            estimate = configurations.mean_estimate(configurations.spread(np.asarray(values)), items=1)
            return (float(estimate.ci95[0]), float(estimate.ci95[1])), "seeds"
        own = (self.intervals.get(metric) or [None])[0]
        return (tuple(own), "evaluation") if own else (None, "none")

    def seed_sd(self, metric: str) -> float | None:
        values = self.finals.get(metric) or []
        return float(np.std(values, ddof=1)) if len(values) > 1 else None


def settings_of(
    config: SweepReportConfig, curves: dict[str, list[dict]], groups: list[list[str]]
) -> list[Setting]:
    """The settings (groups of replicate run labels) with each run's final value and interval per metric."""
    out = []
    for labels in groups:
        finals: dict[str, list[float]] = {}
        intervals: dict[str, list] = {}
        for label in labels:
            for metric in config.metrics:
                last = next(
                    (r for r in reversed(curves[label]) if metric in r and math.isfinite(r[metric])), None
                )
                if last is not None:
                    finals.setdefault(metric, []).append(float(last[metric]))
                    intervals.setdefault(metric, []).append(last.get(f"{metric}_ci95"))
        name = labels[0] if len(labels) == 1 else configuration_label(labels)
        out.append(Setting(name, tuple(labels), finals, intervals))
    return out


@dataclass(frozen=True)
class Verdict:
    """Which setting is best by a metric's final value, whether it is separable from the runner-up (the
    test, its p-value), and the settings indistinguishable from it."""

    metric: str
    best: str
    separable: bool
    runner_up: str | None
    p_value: float | None
    test: str
    tied: tuple[str, ...]  # the best and every setting not separable from it

    def sentence(self) -> str:
        if self.runner_up is None:
            return f"One setting ({self.best}): nothing to rank."
        if self.separable:
            return (
                f"Best by final {self.metric}: {self.best}, separable from the runner-up {self.runner_up} "
                f"(p = {self.p_value:.2g}, {self.test})."
            )
        return (
            f"The top {len(self.tied)} settings by final {self.metric} are indistinguishable: {', '.join(self.tied)} "
            f"({self.test}); {self.best} has the best value, but not separably."
        )


def verdict(settings: list[Setting], metric: str) -> Verdict | None:
    """The best setting by the final `metric` and whether the sweep can tell it from the others."""
    ranked = [s for s in settings if s.mean(metric) is not None]
    if not ranked:
        return None
    ranked.sort(key=lambda s: s.mean(metric), reverse=higher_is_better(metric))
    top = ranked[0]
    if len(ranked) == 1:
        return Verdict(metric, top.label, False, None, None, "", (top.label,))
    tests = [_test(top, other, metric) for other in ranked[1:]]
    tied = (top.label,) + tuple(
        o.label for o, (p, _) in zip(ranked[1:], tests, strict=True) if p is None or p >= ALPHA
    )
    p, test = tests[0]
    return Verdict(metric, top.label, p is not None and p < ALPHA, ranked[1].label, p, test, tied)


def _test(a: Setting, b: Setting, metric: str) -> tuple[float | None, str]:
    """(p-value, test) of a's final value against b's: Welch's t over seeds when both have replicates,
    else a z test on their evaluation intervals (seed noise unmeasured), else none."""
    from scipy.special import ndtr

    x, y = a.finals[metric], b.finals[metric]
    if len(x) > 1 and len(y) > 1:
        _, _, p = configurations.welch(np.asarray(x), np.asarray(y))
        return p, f"Welch t over {len(x)} and {len(y)} seeds"
    (ia, _), (ib, _) = a.interval(metric), b.interval(metric)
    if ia is None or ib is None:
        return None, "no interval logged: seed and evaluation noise unmeasured"
    se = math.hypot((ia[1] - ia[0]) / (2 * Z95), (ib[1] - ib[0]) / (2 * Z95))
    z = abs(np.mean(x) - np.mean(y)) / se if se else math.inf
    return float(2 * ndtr(-z)), "evaluation noise only: one seed per setting, seed noise unmeasured"


def settings_table(
    settings: list[Setting], metrics: tuple[str, ...], x_key: str, tokens: dict[str, Any]
) -> str:
    """One row per setting: its runs, final tokens, and each metric's final mean [95% interval] and seed sd."""
    header = ["setting", "runs", x_key]
    for metric in metrics:
        header += [f"final {metric_label(metric)} [95% interval]", "seed sd"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for s in settings:
        cells = [s.label, str(len(s.runs)), _cell(tokens.get(s.runs[0]))]
        for metric in metrics:
            (ci, source), mean = s.interval(metric), s.mean(metric)
            shown = _cell(mean) + (f" [{_cell(ci[0])}, {_cell(ci[1])}]" if ci else " (no interval logged)")
            if source == "evaluation":
                shown += " (one seed)"
            cells += [shown, _cell(s.seed_sd(metric))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


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


def curves_csv(config: SweepReportConfig, curves: dict[str, list[dict]], setting_of: dict[str, str]) -> str:
    """Every eval record of every run, long format: run, its setting, x, each metric and its interval."""
    columns = [c for m in config.metrics for c in (m, f"{m}_ci95_lo", f"{m}_ci95_hi")]
    lines = [",".join(["run", "setting", config.x_key, *columns])]
    for label, _ in config.runs:
        for record in curves[label]:
            values = []
            for m in config.metrics:
                ci = record.get(f"{m}_ci95") or (None, None)
                values += [repr(record[m]) if m in record else "", _csv(ci[0]), _csv(ci[1])]
            lines.append(
                ",".join([_quoted(label), _quoted(setting_of[label]), str(record[config.x_key]), *values])
            )
    return "\n".join(lines) + "\n"


def _csv(x) -> str:
    return "" if x is None else repr(float(x))


def _quoted(text: str) -> str:
    return f'"{text}"' if "," in text or '"' in text else text


def plot_png(config: SweepReportConfig, curves: dict[str, list[dict]], settings: list[Setting]) -> bytes:
    """One panel per metric, one line per setting against `x_key` (the mean over its seeds, with its t
    interval as a band; a single run with its own interval band); PNG bytes."""
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
        for setting in settings:
            xs, ys, bands = _setting_curve(setting, curves, metric, config.x_key)
            if not xs:
                continue
            seeds = f" ({len(setting.runs)} seeds)" if len(setting.runs) > 1 else ""
            ax.plot(xs, ys, marker="o", label=f"{setting.label}{seeds}")
            drawn = [(x, b) for x, b in zip(xs, bands, strict=True) if b]
            if drawn:
                ax.fill_between(
                    [x for x, _ in drawn], [b[0] for _, b in drawn], [b[1] for _, b in drawn], alpha=0.2
                )
        ax.set_xlabel(f"training {config.x_key}")
        ax.set_ylabel(metric_label(metric))
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()


def _setting_curve(setting: Setting, curves: dict[str, list[dict]], metric: str, x_key: str):
    """A setting's curve: at each x its runs share, the mean and its band (t over seeds, or the run's own)."""
    by_x: dict[Any, list[dict]] = {}
    for label in setting.runs:
        for r in curves[label]:
            if metric in r:
                by_x.setdefault(r[x_key], []).append(r)
    xs, ys, bands = [], [], []
    for x in sorted(by_x):
        rows = by_x[x]
        if len(rows) != len(setting.runs):
            continue
        values = np.array([r[metric] for r in rows], dtype=np.float64)
        xs.append(x)
        ys.append(float(values.mean()))
        if len(values) > 1:
            estimate = configurations.mean_estimate(configurations.spread(values), items=1)
            bands.append((float(estimate.ci95[0]), float(estimate.ci95[1])))
        else:
            bands.append(rows[0].get(f"{metric}_ci95"))
    return xs, ys, bands


def run_sweep_report(config: SweepReportConfig, output_path: str) -> dict:
    """Write `table.md`, `table.csv` and `plot.png` under `output_path`; return the artifact."""
    ctx = current()
    curves = {
        label: read_eval_curve(step, ctx.path_of(step), config.metrics, config.x_key)
        for label, step in config.runs
    }
    groups = replicate_groups(config, ctx.path_of)
    settings = settings_of(config, curves, groups)
    rows = summary_rows(config, curves)
    first = config.metrics[0]
    found = verdict(settings, first)
    tokens = {r["run"]: r[config.x_key] for r in rows}
    one_seed = all(len(s.runs) == 1 for s in settings)
    text = [f"# Sweep report: {', '.join(config.metrics)} at the last evaluation", ""]
    if found is not None:
        text += [found.sentence(), ""]
    if any(m in WINDOW_METRICS for m in config.metrics):
        text += [WINDOW_NOTE, ""]
    if one_seed:
        text += [
            "One seed per setting: seed variance is unmeasured, so these rank runs, not settings; a reseed may "
            "reorder them. Replicate each setting (marin.experiment.replicate) to compare settings.",
            "",
        ]
    text += ["## Settings", "", settings_table(settings, config.metrics, config.x_key, tokens)]
    text += ["## Runs", "", markdown_table(rows)]
    setting_of = {label: s.label for s in settings for label in s.runs}
    storage.write_atomic(storage.join(output_path, TABLE_MD), "\n".join(text).encode())
    storage.write_atomic(
        storage.join(output_path, TABLE_CSV), curves_csv(config, curves, setting_of).encode()
    )
    storage.write_atomic(storage.join(output_path, PLOT_PNG), plot_png(config, curves, settings))
    artifact: dict[str, Any] = {
        "table_path": TABLE_MD,
        "csv_path": TABLE_CSV,
        "plot_path": PLOT_PNG,
        "runs": rows,
        "settings": [
            {
                "setting": s.label,
                "runs": list(s.runs),
                **{f"final_{m}": s.mean(m) for m in config.metrics},
                **{f"final_{m}_ci95": s.interval(m)[0] for m in config.metrics},
                **{f"seed_sd_{m}": s.seed_sd(m) for m in config.metrics},
            }
            for s in settings
        ],
    }
    if found is not None:
        top = next(s for s in settings if s.label == found.best)
        ci, _ = top.interval(first)
        artifact["headline"] = {
            "metric": f"final_{first}",
            "value": top.mean(first),
            "ci95": list(ci) if ci else None,
            "n": len(top.runs),
            "run": found.best,
            "separable": found.separable,
            "indistinguishable": list(found.tied) if not found.separable else [],
            "verdict": found.sentence(),
        }
        if not found.separable:  # `marin status` prints it beside the value
            artifact["headline"]["warning"] = found.sentence()
    return artifact


def replicate_groups(config: SweepReportConfig, path_of) -> list[list[str]]:
    """The run labels grouped into settings: runs whose keys differ only in seed fields are one setting."""
    keys: dict[str, list[str]] = {}
    for label, step in config.runs:
        info = read_info(path_of(step))
        key = configuration_of(info, own_seeds=True).key if info is not None else f"unknown:{step}"
        keys.setdefault(key, []).append(label)
    return list(keys.values())
