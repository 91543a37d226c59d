"""`table.md` of a scaling fit: the prediction, both approaches' exponents, the law, the optima, the runs.

Every estimate is shown with its 95% interval, or with the count it rests on where it has none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from marin.scaling_laws.fit_step import Prediction, ScalingReport


def markdown_report(report: ScalingReport) -> str:
    """The report as Markdown tables."""
    config, law, iso = report.config, report.loss_law, report.isoflop
    metric = config.metric
    lines = [
        f"# Scaling fit of `{metric}`: {len(config.runs)} runs at {len(iso.optima)} budgets",
        "",
        f"## Prediction at C = {config.target:.3g} FLOPs",
        "",
        _table(
            ["approach", "N*", "D*", "tokens per parameter", metric],
            [
                _prediction_row("Approach 3 (the law)", report.approach3, interval_note=""),
                _prediction_row(
                    "Approach 2 (isoflop minima)", report.approach2, interval_note=" (the law at this split)"
                ),
            ],
        ),
        "",
        "## Compute-optimal exponents: N* ∝ C^a, D* ∝ C^b",
        "",
        _table(
            ["approach", "a", "b", "rests on"],
            [
                [
                    "Approach 2",
                    _with(iso.a, iso.intervals.get("a")),
                    _with(iso.b, iso.intervals.get("b")),
                    f"{len(iso.optima)} budgets (t interval, {iso.params_law.dof} degrees of freedom)",
                ],
                [
                    "Approach 3",
                    _with(report.family_exponents["a"], report.family_intervals.get("a")),
                    _with(report.family_exponents["b"], report.family_intervals.get("b")),
                    f"{law.n} runs ({law.bootstrap} bootstrap resamples)",
                ],
            ],
        ),
        "",
        f"Approach 3's exponents are for this family's FLOPs per token, f(N) = {report.per_token.coefficient:.4g} · "
        f"N^{report.per_token.power:.4f}; under C = 6ND they would be a = {law.a:.4g}, b = {law.b:.4g}.",
        "",
        "## Approach 3: L(N, D) = E + A / N^alpha + B / D^beta",
        "",
        _table(
            ["parameter", "value", "95% interval"],
            [
                [name, _number(getattr(law, name)), _interval(law.intervals.get(name))]
                for name in ("E", "A", "B", "alpha", "beta")
            ],
        ),
        "",
        f"Huber loss on log L with delta = {law.huber_delta:g}; {law.bootstrap} bootstrap resamples (seed {law.seed}); "
        f"standard deviation of the log residuals {float(report.loss_law.residuals.std()):.3g}.",
        "",
        "## Approach 2: the optimum of each budget",
        "",
        _table(
            ["budget (FLOPs)", "runs", "N*", "D*", f"{metric} at N*", "within the sizes trained"],
            [
                [
                    _number(o.budget),
                    str(o.runs),
                    _number(o.params),
                    _number(o.tokens),
                    _number(o.loss),
                    "yes" if o.inside else f"no ({_number(o.sizes[0])}..{_number(o.sizes[1])}): extrapolated",
                ]
                for o in iso.optima
            ],
        ),
        "",
        "## Runs",
        "",
        _table(
            ["run", "budget", "N", "D", "model FLOPs", metric, "law", "log residual"],
            [
                [
                    f"`{run.label}`",
                    _number(run.budget),
                    _number(run.params),
                    _number(run.tokens),
                    _number(run.flops),
                    _with_stderr(report.metric_values[i], report.metric_stderrs[i]),
                    _number(float(law.predict(run.params, run.tokens))),
                    f"{law.residuals[i]:+.4f}",
                ]
                for i, run in enumerate(config.runs)
            ],
        ),
        "",
    ]
    return "\n".join(lines)


def _prediction_row(name: str, p: Prediction, interval_note: str) -> list[str]:
    return [
        name,
        _with(p.params, p.params_interval),
        _with(p.tokens, p.tokens_interval),
        _number(p.tokens / p.params),
        _with(p.loss, p.loss_interval) + interval_note,
    ]


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return "\n".join(lines)


def _number(value: float) -> str:
    return f"{value:.4g}"


def _interval(bounds: tuple[float, float] | None) -> str:
    return f"[{bounds[0]:.4g}, {bounds[1]:.4g}]" if bounds else "n/a"


def _with(value: float, bounds: tuple[float, float] | None) -> str:
    return f"{value:.4g} {_interval(bounds)}" if bounds else f"{value:.4g}"


def _with_stderr(value: float, stderr: float | None) -> str:
    return f"{value:.4g} ± {stderr:.2g}" if stderr is not None else f"{value:.4g}"
