"""What a scaling fit prints: `table.md` (the prediction, both approaches' exponents, the law, the optima,
the runs), the warnings that travel with its prediction, and the summary a terminal shows.

Every estimate is shown with its 95% interval, or with the count it rests on where it has none. A
prediction beyond the budgets trained is an extrapolation; `warnings` says so, with how far and how
loosely the fit pins the optimum there, and the fit's artifact carries them to `marin status` (its
headline's `warning`), `marin info`, the terminal summary (`summary_lines`) and `table.md`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from marin.scaling_laws.fit_step import Prediction, ScalingReport


SPAN_WARNING = 10.0
"""An interval whose upper end is this many times its lower end pins nothing down: it is warned about."""


def warnings(report: ScalingReport) -> list[str]:
    """What a reader of the prediction must know: how far it extrapolates beyond the budgets trained, an
    optimum whose interval spans more than SPAN_WARNING-fold, budgets whose parabola's vertex lies outside
    the sizes trained, and exponents resting on fewer than four budgets."""
    config, iso = report.config, report.isoflop
    largest = max(r.budget for r in config.runs)
    out = []
    if config.target > largest:
        out.append(
            f"the prediction at C = {config.target:.3g} extrapolates {config.target / largest:.3g}x beyond the "
            f"largest budget trained ({largest:.3g}): its interval is the uncertainty of the law given these runs, "
            "not a guarantee that the law holds out there"
        )
    for name, bounds in (("N*", report.approach3.params_interval), ("D*", report.approach3.tokens_interval)):
        if bounds and bounds[0] > 0 and bounds[1] / bounds[0] > SPAN_WARNING:
            out.append(
                f"its {name} interval [{bounds[0]:.3g}, {bounds[1]:.3g}] spans {bounds[1] / bounds[0]:.3g}x: "
                "the fit does not pin the optimum down"
            )
    outside = [o.budget for o in iso.optima if not o.inside]
    if outside:
        budgets = ", ".join(f"{b:.3g}" for b in outside)
        out.append(
            f"at budget(s) {budgets} the optimum lies outside the sizes trained (an extrapolated vertex)"
        )
    if len(iso.optima) < 4:
        out.append(
            f"the exponents rest on {len(iso.optima)} budgets ({max(len(iso.optima) - 2, 0)} degrees of freedom "
            "for Approach 2's lines)"
        )
    return out


def summary_lines(result: dict) -> list[str]:
    """The terminal summary of a fit from its artifact: the exponents and the prediction with their 95%
    intervals, then its warnings."""
    a2, a3, prediction = result["approach2"], result["approach3"], result["prediction"]
    bounds = prediction["intervals"]
    largest = result.get("largest_budget")
    factor = f" ({prediction['flops'] / largest:.3g}x the largest budget)" if largest else ""
    lines = [
        f"{result['runs']} runs at {result['budgets']} budgets; metric {result['metric']}, 95% intervals",
        f"Approach 2   N* ∝ C^a  a = {_text(a2['a'], a2['intervals'].get('a'))}",
        f"             D* ∝ C^b  b = {_text(a2['b'], a2['intervals'].get('b'))}",
        f"Approach 3   N* ∝ C^a  a = {_text(a3['a'], a3['intervals'].get('a'))}",
        f"             D* ∝ C^b  b = {_text(a3['b'], a3['intervals'].get('b'))}",
        f"             alpha = {_text(a3['alpha'], a3['intervals'].get('alpha'))}",
        f"             beta  = {_text(a3['beta'], a3['intervals'].get('beta'))}",
        f"             E     = {_text(a3['E'], a3['intervals'].get('E'))}",
        f"at C = {prediction['flops']:.3g} FLOPs{factor}:",
        f"  N* = {prediction['params']:.3g} {_range(bounds.get('params'))}",
        f"  D* = {prediction['tokens']:.3g} {_range(bounds.get('tokens'))}",
        f"  predicted {result['metric']} = {_text(prediction['loss'], bounds.get('loss'))}",
    ]
    lines += [f"warning: {w}" for w in result.get("warnings", [])]
    return lines


def _text(value: float, bounds) -> str:
    return f"{value:.3f} [{bounds[0]:.3f}, {bounds[1]:.3f}]" if bounds else f"{value:.3f} (no interval)"


def _range(bounds) -> str:
    return f"[{bounds[0]:.3g}, {bounds[1]:.3g}]" if bounds else ""


def markdown_report(report: ScalingReport) -> str:
    """The report as Markdown tables."""
    config, law, iso = report.config, report.loss_law, report.isoflop
    metric = config.metric
    cautions = warnings(report)
    lines = [
        f"# Scaling fit of `{metric}`: {len(config.runs)} runs at {len(iso.optima)} budgets",
        "",
        *([f"**Warning:** {w}." for w in cautions] + [""] if cautions else []),
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
