"""Approach 2 of Hoffmann et al. (2022): the loss-minimizing model size of each compute budget.

At each budget C the runs differ in model size N and tokens D (with C fixed), and their final loss
is fitted by a parabola in ln N, L = c2 (ln N)^2 + c1 ln N + c0 (least squares). Its vertex is the
budget's optimum N*(C) = exp(-c1 / (2 c2)) with the loss L*(C) there. A line through the points
(ln C, ln N*) is the power law N*(C) = k C^a; the tokens of each optimum give D*(C) = k' C^b.

D* at a budget is read off the budget's own runs: ln D is fitted as a line in ln N over them (exact
when D = C / flops_per_token(N) with flops_per_token a power of N) and evaluated at ln N*. Without
the runs' tokens, D* = C / (6 N*), so b = 1 - a.

Intervals: the exponent of each power law is an ordinary least-squares slope over the budgets'
optima, and its 95% interval is slope ± t(0.975, k - 2) · standard error, for k budgets. It rests
on the scatter of the optima around the line, so it needs at least 3 budgets, and with few budgets
it is wide: that is how little a handful of budgets says about an exponent.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from marin.scaling_laws.errors import ScalingLawError
from marin.scaling_laws.points import canonical_order, positive_array, same_length

MIN_SIZES = 3
"""Distinct model sizes a budget needs for its parabola."""
MIN_BUDGETS = 2
"""Budgets a power law needs; an interval on its exponent needs one more."""
CONFIDENCE = 0.95


@dataclass(frozen=True)
class BudgetOptimum:
    """The fitted optimum of one compute budget: its parabola's vertex and what it rests on.

    `coefficients` are (c2, c1, c0) of L = c2 (ln N)^2 + c1 ln N + c0. `inside` says whether N*
    lies within the sizes the budget sampled; outside, the vertex is an extrapolation and the
    budget's sizes do not bracket its optimum.
    """

    budget: float
    params: float
    tokens: float
    loss: float
    coefficients: tuple[float, float, float]
    runs: int
    sizes: tuple[float, float]
    inside: bool

    def to_json(self) -> dict:
        return {
            "budget": self.budget,
            "params": self.params,
            "tokens": self.tokens,
            "loss": self.loss,
            "coefficients": list(self.coefficients),
            "runs": self.runs,
            "sizes": list(self.sizes),
            "inside": self.inside,
        }


@dataclass(frozen=True)
class PowerLaw:
    """y = coefficient · C^exponent, fitted in log space over the budgets' optima.

    `interval` is the exponent's 95% interval (None with fewer than 3 budgets); `dof` the degrees
    of freedom of its t quantile (budgets - 2). `mean_log_flops`, `spread` (the sum of squared
    deviations of ln C) and `residual_variance` are what `interval_at` needs.
    """

    exponent: float
    coefficient: float
    interval: tuple[float, float] | None
    dof: int
    mean_log_flops: float
    spread: float
    residual_variance: float | None

    def __call__(self, flops: float | np.ndarray) -> float | np.ndarray:
        """The power law's value at `flops`."""
        return self.coefficient * np.power(flops, self.exponent)

    def interval_at(self, flops: float) -> tuple[float, float] | None:
        """The 95% interval of the line's value at `flops` (the fitted mean, not a new budget's scatter)."""
        if self.residual_variance is None:
            return None
        from scipy.stats import t

        x = math.log(flops)
        stderr = math.sqrt(
            self.residual_variance * (1 / (self.dof + 2) + (x - self.mean_log_flops) ** 2 / self.spread)
        )
        half = float(t.ppf(0.5 + CONFIDENCE / 2, self.dof)) * stderr
        centre = math.log(self.coefficient) + self.exponent * x
        return math.exp(centre - half), math.exp(centre + half)

    def to_json(self) -> dict:
        return {
            "exponent": self.exponent,
            "coefficient": self.coefficient,
            "interval": list(self.interval) if self.interval else None,
            "dof": self.dof,
        }


@dataclass(frozen=True)
class IsoflopFit:
    """Approach 2: each budget's optimum and the power laws N*(C) ∝ C^a, D*(C) ∝ C^b through them.

    `intervals` maps "a" and "b" to their 95% intervals (empty with fewer than 3 budgets).
    """

    optima: tuple[BudgetOptimum, ...]
    params_law: PowerLaw
    tokens_law: PowerLaw
    tokens_from_runs: bool

    @property
    def a(self) -> float:
        """N*(C) ∝ C^a."""
        return self.params_law.exponent

    @property
    def b(self) -> float:
        """D*(C) ∝ C^b."""
        return self.tokens_law.exponent

    @property
    def intervals(self) -> dict[str, tuple[float, float]]:
        out = {}
        if self.params_law.interval:
            out["a"] = self.params_law.interval
        if self.tokens_law.interval:
            out["b"] = self.tokens_law.interval
        return out

    def optimal(self, flops: float) -> tuple[float, float]:
        """The compute-optimal (params, tokens) the two power laws give at `flops`."""
        return float(self.params_law(flops)), float(self.tokens_law(flops))

    def to_json(self) -> dict:
        return {
            "a": self.a,
            "b": self.b,
            "intervals": {k: list(v) for k, v in self.intervals.items()},
            "confidence": CONFIDENCE if self.intervals else None,
            "params_law": self.params_law.to_json(),
            "tokens_law": self.tokens_law.to_json(),
            "tokens_from_runs": self.tokens_from_runs,
            "optima": [o.to_json() for o in self.optima],
        }


def fit_isoflop(
    budgets: Sequence[float] | np.ndarray,
    params: Sequence[float] | np.ndarray,
    loss: Sequence[float] | np.ndarray,
    *,
    tokens: Sequence[float] | np.ndarray | None = None,
) -> IsoflopFit:
    """Approach 2 over runs: run i trained a model of `params[i]` parameters at compute budget
    `budgets[i]` to final `loss[i]` (on `tokens[i]` tokens, when given).

    Runs are grouped by their budget (equal values); each budget needs at least 3 model sizes, and
    the fit at least 2 budgets (3 for intervals). The result does not depend on the order of the runs.
    """
    where = "fit_isoflop"
    c = positive_array(budgets, "budgets", where)
    n = positive_array(params, "params", where)
    y = positive_array(loss, "loss", where)
    columns = {"budgets": c, "params": n, "loss": y}
    d = None
    if tokens is not None:
        d = positive_array(tokens, "tokens", where)
        columns["tokens"] = d
    same_length(where, **columns)
    order = canonical_order(c, n, y) if d is None else canonical_order(c, n, y, d)
    c, n, y = c[order], n[order], y[order]
    d = None if d is None else d[order]

    groups = budget_groups(c, n, where)
    optima = tuple(
        _budget_optimum(b, n[rows], y[rows], None if d is None else d[rows], where)
        for b, rows in groups.items()
    )
    flops = np.array([o.budget for o in optima])
    params_law = _power_law(flops, np.array([o.params for o in optima]))
    tokens_law = _power_law(flops, np.array([o.tokens for o in optima]))
    return IsoflopFit(
        optima=optima, params_law=params_law, tokens_law=tokens_law, tokens_from_runs=d is not None
    )


def budget_groups(budgets: np.ndarray, params: np.ndarray, where: str) -> dict[float, np.ndarray]:
    """The runs of each budget (budget -> indices), checked: at least 3 sizes per budget, 2 budgets."""
    groups = {float(budget): np.flatnonzero(budgets == budget) for budget in np.unique(budgets)}
    sizes = {b: np.unique(params[rows]).size for b, rows in groups.items()}
    short = {b: k for b, k in sizes.items() if k < MIN_SIZES}
    if short:
        if set(sizes.values()) == {1}:
            found = f"each of the {len(groups)} budgets has a single size"
        else:
            found = "budget " + ", ".join(f"{b:.3g} has {k}" for b, k in sorted(short.items()))
        raise ScalingLawError(
            f"{where}: Approach 2 fits a parabola per budget and needs at least {MIN_SIZES} model sizes at "
            f"each budget, but {found}: train more sizes at those budgets, or fit the runs with fit_loss_law"
        )
    if len(groups) < MIN_BUDGETS:
        raise ScalingLawError(
            f"{where}: {len(groups)} budget; a power law through the optima needs at least {MIN_BUDGETS} "
            "budgets (3 for an interval on its exponent)"
        )
    return groups


def _budget_optimum(
    budget: float, params: np.ndarray, loss: np.ndarray, tokens: np.ndarray | None, where: str
) -> BudgetOptimum:
    """The vertex of the parabola through one budget's runs, and D* there."""
    log_n = np.log(params)
    c2, c1, c0 = np.polyfit(log_n, loss, 2)
    if not c2 > 0:
        raise ScalingLawError(
            f"{where}: at budget {budget:.3g} the loss is not convex in log N over its sizes "
            f"({_sizes(params)}): they do not bracket an optimum; add smaller and larger models at that budget"
        )
    vertex = -c1 / (2 * c2)
    best = float(np.exp(vertex))
    if tokens is None:
        best_tokens = budget / (6.0 * best)
    else:
        slope, intercept = np.polyfit(log_n, np.log(tokens), 1)
        best_tokens = float(np.exp(intercept + slope * vertex))
    return BudgetOptimum(
        budget=budget,
        params=best,
        tokens=best_tokens,
        loss=float(c0 - c1 * c1 / (4 * c2)),
        coefficients=(float(c2), float(c1), float(c0)),
        runs=int(params.size),
        sizes=(float(params.min()), float(params.max())),
        inside=bool(params.min() <= best <= params.max()),
    )


def _power_law(flops: np.ndarray, values: np.ndarray) -> PowerLaw:
    """The least-squares line through (ln C, ln value), with a t interval on its slope."""
    x, y = np.log(flops), np.log(values)
    slope, intercept = np.polyfit(x, y, 1)
    dof = x.size - 2
    spread = float(np.sum((x - x.mean()) ** 2))
    interval, variance = None, None
    if dof > 0:
        from scipy.stats import t

        residual = y - (intercept + slope * x)
        variance = float(residual @ residual) / dof
        half = float(t.ppf(0.5 + CONFIDENCE / 2, dof)) * math.sqrt(variance / spread)
        interval = (float(slope - half), float(slope + half))
    return PowerLaw(
        exponent=float(slope),
        coefficient=float(np.exp(intercept)),
        interval=interval,
        dof=dof,
        mean_log_flops=float(x.mean()),
        spread=spread,
        residual_variance=variance,
    )


def _sizes(params: np.ndarray) -> str:
    return ", ".join(f"{p:.3g}" for p in np.unique(params))
