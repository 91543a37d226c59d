"""The body of a scaling-fit step: read each run's metric, fit both approaches, predict, write the report.

`run_scaling_fit` is what `marin.experiment.scaling.scaling_fit` binds as a step's `fn`. It finds
the runs' outputs through `marin.execution.context.current()` and writes, under the step's output:

- `fit.json`: the runs (N, D, C, the metric and where it was read), Approach 3 (the law, its
  bootstrap intervals, residuals), Approach 2 (each budget's optimum, the power laws with their
  intervals), the family's FLOPs per token as a power of N, and the prediction at the target budget;
- `table.md`: the same as tables;
- `isoflop.png`, `frontier.png`, `predicted.png` (see `marin.scaling_laws.plots`).

Every file is written atomically, and the step's artifact (its return value) is written by the
runner after them, so a reader that sees the artifact sees every file.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import orjson

import storage
from marin.execution.context import current
from marin.scaling_laws.errors import ScalingLawError
from marin.scaling_laws.flops import PerTokenFlops
from marin.scaling_laws.isoflop import IsoflopFit, fit_isoflop
from marin.scaling_laws.loss_law import CONFIDENCE, LossLawFit, fit_loss_law, optimal_split
from marin.scaling_laws.plots import render_plots
from marin.scaling_laws.report import markdown_report, warnings
from marin.scaling_laws.runs import ScalingRun, checked_reading, read_run_metric

FIT_FILE = "fit.json"
TABLE_FILE = "table.md"
PLOTS = ("isoflop.png", "frontier.png", "predicted.png")
TARGET_FACTOR = 10.0
"""Without a target budget, the prediction is made at this many times the largest budget."""


@dataclass(frozen=True, kw_only=True)
class FitOptions:
    """How a scaling fit reads and fits its runs: the metric, the budget to predict at, Approach 3's
    bootstrap (`bootstrap` resamples from `seed`) and Huber delta, and whether to draw the plots."""

    metric: str = "eval_bpb"
    target_flops: float | None = None
    bootstrap: int = 1000
    seed: int = 0
    huber_delta: float = 1e-3
    plots: bool = True


@dataclass(frozen=True, kw_only=True)
class ScalingFitConfig(FitOptions):
    """Everything a scaling-fit step needs: its runs (steps, budgets, N, D, C) and the options."""

    runs: tuple[ScalingRun, ...]

    @property
    def target(self) -> float:
        """The budget the prediction is made at."""
        return self.target_flops or TARGET_FACTOR * max(r.budget for r in self.runs)


@dataclass(frozen=True)
class Prediction:
    """The loss-optimal split of a budget and the loss there, each with a 95% interval (or None)."""

    flops: float
    params: float
    tokens: float
    loss: float
    params_interval: tuple[float, float] | None
    tokens_interval: tuple[float, float] | None
    loss_interval: tuple[float, float] | None

    def to_json(self) -> dict:
        return {
            "flops": self.flops,
            "params": self.params,
            "tokens": self.tokens,
            "loss": self.loss,
            "intervals": {
                name: list(bounds)
                for name, bounds in (
                    ("params", self.params_interval),
                    ("tokens", self.tokens_interval),
                    ("loss", self.loss_interval),
                )
                if bounds is not None
            },
        }


@dataclass(frozen=True)
class ScalingReport:
    """Everything one fit found: what `fit.json`, `table.md` and the plots are made of."""

    config: ScalingFitConfig
    metric_values: tuple[float, ...]
    metric_stderrs: tuple[float | None, ...]
    sources: tuple[str, ...]
    loss_law: LossLawFit
    isoflop: IsoflopFit
    per_token: PerTokenFlops
    family_exponents: dict[str, float]
    family_intervals: dict[str, tuple[float, float]]
    approach3: Prediction
    approach2: Prediction

    def to_json(self) -> dict:
        config = self.config
        runs = []
        for i, run in enumerate(config.runs):
            runs.append(
                {
                    "run": run.label,
                    "train_step": run.train_step,
                    "evaluation_step": run.evaluation_step,
                    "budget": run.budget,
                    "params": run.params,
                    "tokens": run.tokens,
                    "flops": run.flops,
                    config.metric: self.metric_values[i],
                    "stderr": self.metric_stderrs[i],
                    "source": self.sources[i],
                    "predicted": float(self.loss_law.predict(run.params, run.tokens)),
                    "log_residual": float(self.loss_law.residuals[i]),
                }
            )
        return {
            "metric": config.metric,
            "confidence": CONFIDENCE,
            "runs": runs,
            "approach3": {
                **self.loss_law.to_json(),
                "exponents_in_family": self.family_exponents,
                "exponent_intervals_in_family": {k: list(v) for k, v in self.family_intervals.items()},
                "residual_sd": float(np.std(self.loss_law.residuals)),
            },
            "approach2": self.isoflop.to_json(),
            "flops_per_token": self.per_token.to_json(),
            "target": {
                "flops": config.target,
                "approach3": self.approach3.to_json(),
                "approach2": self.approach2.to_json(),
            },
        }


def run_scaling_fit(config: ScalingFitConfig, output_path: str) -> dict:
    """Fit the runs' metric both ways; write `fit.json`, `table.md` and the plots; return the artifact.

    The report and the plots are imported by module-level name, so that their code is part of the
    step's code fingerprint: a change to either reruns the fit (matplotlib loads only to draw)."""
    ctx = current()
    report = scaling_report(config, ctx.path_of)
    storage.write_atomic(
        storage.join(output_path, FIT_FILE), orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2)
    )
    storage.write_atomic(storage.join(output_path, TABLE_FILE), markdown_report(report).encode())
    if config.plots:
        for name, png in render_plots(report).items():
            storage.write_atomic(storage.join(output_path, name), png)
    return artifact_of(report)


def scaling_report(config: ScalingFitConfig, path_of) -> ScalingReport:
    """Read every run's metric, then fit and predict (no files written)."""
    readings = [read_run_metric(run, config.metric, path_of) for run in config.runs]
    values = [checked_reading(run, config.metric, r) for run, r in zip(config.runs, readings, strict=True)]
    params = [r.params for r in config.runs]
    tokens = [r.tokens for r in config.runs]
    loss_law = fit_loss_law(
        params, tokens, values, huber_delta=config.huber_delta, bootstrap=config.bootstrap, seed=config.seed
    )
    isoflop = fit_isoflop([r.budget for r in config.runs], params, values, tokens=tokens)
    per_token = PerTokenFlops.fit(params, [r.flops / r.tokens for r in config.runs])
    exponents, intervals = _family_exponents(loss_law, per_token)
    return ScalingReport(
        config=config,
        metric_values=tuple(values),
        metric_stderrs=tuple(r.stderr for r in readings),
        sources=tuple(r.source for r in readings),
        loss_law=loss_law,
        isoflop=isoflop,
        per_token=per_token,
        family_exponents=exponents,
        family_intervals=intervals,
        approach3=_predict_approach3(loss_law, per_token, config.target),
        approach2=_predict_approach2(isoflop, loss_law, config.target),
    )


def artifact_of(report: ScalingReport) -> dict:
    """The step's artifact: where the files are, the exponents and the prediction (the headline)."""
    a3, target = report.approach3, report.config.target
    cautions = warnings(report)
    headline = {
        "metric": f"predicted {report.config.metric} at C={target:.3g}",
        "value": a3.loss,
        "ci95": list(a3.loss_interval) if a3.loss_interval else None,
        "n": len(report.config.runs),
    }
    if cautions:
        headline["warning"] = cautions[0]
    return {
        "fit_path": FIT_FILE,
        "table_path": TABLE_FILE,
        "plots": list(PLOTS) if report.config.plots else [],
        "metric": report.config.metric,
        "runs": len(report.config.runs),
        "budgets": len(report.isoflop.optima),
        "approach2": {
            "a": report.isoflop.a,
            "b": report.isoflop.b,
            "intervals": {k: list(v) for k, v in report.isoflop.intervals.items()},
        },
        "approach3": {
            **{k: getattr(report.loss_law, k) for k in ("E", "A", "B", "alpha", "beta")},
            "a": report.family_exponents["a"],
            "b": report.family_exponents["b"],
            "intervals": {
                **{k: list(v) for k, v in report.loss_law.intervals.items() if k not in ("a", "b")},
                **{k: list(v) for k, v in report.family_intervals.items()},
            },
        },
        "prediction": a3.to_json(),
        "largest_budget": max(r.budget for r in report.config.runs),
        "warnings": cautions,
        "headline": headline,
    }


def _family_exponents(
    law: LossLawFit, per_token: PerTokenFlops
) -> tuple[dict[str, float], dict[str, tuple[float, float]]]:
    """N* ∝ C^a and D* ∝ C^b implied by the law when D = C / (k N^p), with bootstrap intervals.

    Minimizing A N^-alpha + B (k N^p / C)^beta over N gives a = beta / (alpha + p beta) and
    b = 1 - p a; with p = 1 (C = 6ND) these are the usual beta / (alpha + beta) and alpha / (alpha + beta).
    """
    p = per_token.power

    def exponents(alpha, beta):
        with np.errstate(invalid="ignore", divide="ignore"):
            a = beta / (alpha + p * beta)
        return a, 1 - p * a

    a, b = exponents(law.alpha, law.beta)
    intervals = {}
    if law.replicates.size:
        ra, rb = exponents(law.replicates[:, 3], law.replicates[:, 4])
        intervals = {"a": _percentiles(ra), "b": _percentiles(rb)}
        intervals = {k: v for k, v in intervals.items() if v is not None}
    return {"a": float(a), "b": float(b)}, intervals


def _predict_approach3(law: LossLawFit, per_token: PerTokenFlops, flops: float) -> Prediction:
    """The law's optimal split of `flops` under the family's FLOPs per token, with bootstrap intervals."""
    laws = np.array([[law.E, law.A, law.B, law.alpha, law.beta]])
    params, tokens = optimal_split(laws[0], flops, per_token)
    loss = float(law.predict(params, tokens))
    intervals: list[tuple[float, float] | None] = [None, None, None]
    if law.replicates.size:
        split = []
        for row in law.replicates:
            if not np.all(np.isfinite(row)):
                continue
            try:
                n, d = optimal_split(row, flops, per_token)
            except ScalingLawError:  # a resample whose exponent fell to 0 has no optimal split
                continue
            split.append((n, d, row[0] + row[1] * n ** -row[3] + row[2] * d ** -row[4]))
        if split:
            columns = np.array(split).T
            intervals = [_percentiles(column) for column in columns]
    return Prediction(flops, params, tokens, loss, *intervals)


def _predict_approach2(isoflop: IsoflopFit, law: LossLawFit, flops: float) -> Prediction:
    """The power laws' split of `flops` (intervals: the lines' 95% band there), and the law's loss at it."""
    params, tokens = isoflop.optimal(flops)
    return Prediction(
        flops=flops,
        params=params,
        tokens=tokens,
        loss=float(law.predict(params, tokens)),
        params_interval=isoflop.params_law.interval_at(flops),
        tokens_interval=isoflop.tokens_law.interval_at(flops),
        loss_interval=None,
    )


def _percentiles(values: np.ndarray) -> tuple[float, float] | None:
    values = np.asarray(values, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return None
    tail = 100 * (1 - CONFIDENCE) / 2
    lo, hi = np.percentile(values, [tail, 100 - tail])
    return float(lo), float(hi)
