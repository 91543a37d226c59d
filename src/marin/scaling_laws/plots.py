"""The three plots of a scaling fit, as PNG bytes (matplotlib, off-screen).

- `isoflop.png`: the metric against N at each budget, with each budget's parabola and its minimum
  (Approach 2) and the fitted law along the same budget (Approach 3, dashed);
- `frontier.png`: the compute-optimal N* and D* against C: Approach 2's minima and power laws,
  Approach 3's optimum, both carried to the target budget with their 95% intervals;
- `predicted.png`: each run's metric against the law's prediction, with the line y = x.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import numpy as np

from marin.scaling_laws.loss_law import optimal_split

if TYPE_CHECKING:
    from marin.scaling_laws.fit_step import ScalingReport


def render_plots(report: ScalingReport) -> dict[str, bytes]:
    """File name -> PNG bytes for each plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = {}
    for name, draw in (("isoflop.png", _isoflop), ("frontier.png", _frontier), ("predicted.png", _predicted)):
        fig = draw(plt, report)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
        plt.close(fig)
        out[name] = buffer.getvalue()
    return out


def _colors(plt, count: int):
    cmap = plt.get_cmap("viridis")
    return [cmap(0.1 + 0.8 * i / max(1, count - 1)) for i in range(count)]


def _isoflop(plt, report: ScalingReport):
    runs, metric = report.config.runs, report.config.metric
    fig, ax = plt.subplots(figsize=(7, 4.5))
    law, per_token = report.loss_law, report.per_token
    for color, optimum in zip(_colors(plt, len(report.isoflop.optima)), report.isoflop.optima, strict=True):
        mine = [i for i, r in enumerate(runs) if r.budget == optimum.budget]
        params = np.array([runs[i].params for i in mine], dtype=np.float64)
        values = np.array([report.metric_values[i] for i in mine])
        ax.scatter(params, values, color=color, zorder=3, label=f"C = {optimum.budget:.2g}")
        span = np.linspace(np.log(params.min()) - 0.3, np.log(params.max()) + 0.3, 100)
        c2, c1, c0 = optimum.coefficients
        ax.plot(np.exp(span), c2 * span**2 + c1 * span + c0, color=color, linewidth=1)
        ax.scatter(
            [optimum.params], [optimum.loss], color=color, marker="*", s=160, edgecolor="black", zorder=4
        )
        n = np.exp(span)
        ax.plot(n, law.predict(n, optimum.budget / per_token(n)), color=color, linestyle="--", linewidth=1)
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(plt.FuncFormatter(_two_and_five))  # every minor label would overlap
    ax.set_xlabel("parameters N")
    ax.set_ylabel(metric)
    ax.set_title("isoflop curves: parabola per budget (solid, * its minimum), the law (dashed)")
    ax.title.set_fontsize(9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _two_and_five(value: float, _position: int) -> str:
    """A minor tick's label on a log axis: only at 2 and 5 times a power of ten."""
    mantissa = value / 10 ** np.floor(np.log10(value))
    return f"{value:.0e}".replace("e+0", "e") if round(mantissa) in (2, 5) else ""


def _frontier(plt, report: ScalingReport):
    iso, law, per_token = report.isoflop, report.loss_law, report.per_token
    target = report.config.target
    budgets = np.array([o.budget for o in iso.optima])
    span = np.logspace(np.log10(budgets.min()) - 0.2, np.log10(max(target, budgets.max())) + 0.2, 60)
    law_row = np.array([law.E, law.A, law.B, law.alpha, law.beta])
    law_split = np.array([optimal_split(law_row, c, per_token) for c in span])
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    panels = (
        ("params", "N*", [o.params for o in iso.optima], iso.params_law, law_split[:, 0], iso.a),
        ("tokens", "D*", [o.tokens for o in iso.optima], iso.tokens_law, law_split[:, 1], iso.b),
    )
    for ax, (key, label, minima, power_law, law_curve, exponent) in zip(axes, panels, strict=True):
        ax.scatter(budgets, minima, color="C0", zorder=3, label="Approach 2: minimum per budget")
        ax.plot(span, power_law(span), color="C0", label=f"Approach 2: ∝ C^{exponent:.3f}")
        ax.plot(span, law_curve, color="C1", linestyle="--", label="Approach 3: the law's optimum")
        for prediction, color in ((report.approach2, "C0"), (report.approach3, "C1")):
            value = getattr(prediction, key)
            bounds = getattr(prediction, f"{key}_interval")
            if bounds:
                ax.errorbar(
                    [target],
                    [value],
                    yerr=[[value - bounds[0]], [bounds[1] - value]],
                    color=color,
                    capsize=4,
                    zorder=4,
                )
            ax.scatter([target], [value], color=color, marker="D", zorder=5)
        ax.axvline(target, color="gray", linestyle=":", linewidth=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        # the view follows the estimates; an interval wider than that runs off the panel
        shown = np.concatenate([minima, power_law(span), law_curve])
        shown = shown[np.isfinite(shown) & (shown > 0)]
        ax.set_ylim(shown.min() / 3, shown.max() * 3)
        ax.set_xlabel("compute C (model FLOPs)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    fig.suptitle(f"compute-optimal frontier; target C = {target:.3g} (95% intervals)", fontsize=10)
    fig.tight_layout()
    return fig


def _predicted(plt, report: ScalingReport):
    runs, law = report.config.runs, report.loss_law
    fig, ax = plt.subplots(figsize=(5, 5))
    budgets = sorted({r.budget for r in runs})
    for color, budget in zip(_colors(plt, len(budgets)), budgets, strict=True):
        mine = [i for i, r in enumerate(runs) if r.budget == budget]
        predicted = [float(law.predict(runs[i].params, runs[i].tokens)) for i in mine]
        ax.scatter(predicted, [report.metric_values[i] for i in mine], color=color, label=f"C = {budget:.2g}")
    values = np.array(report.metric_values)
    edge = (values.min() * 0.98, values.max() * 1.02)
    ax.plot(edge, edge, color="gray", linewidth=1)
    ax.set_xlabel(f"the law's {report.config.metric}")
    ax.set_ylabel(f"observed {report.config.metric}")
    ax.set_title("observed against the fitted law", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
