"""Approach 3 of Hoffmann et al. (2022), fitted as Besiroglu et al. (2024) replicated it.

The law is L(N, D) = E + A / N^alpha + B / D^beta for a model of N parameters trained on D tokens.
It is fitted in log space: with E = exp(e), A = exp(a), B = exp(b),

    log L_hat(N, D) = logsumexp(a - alpha log N, b - beta log D, e)

and the parameters minimize the sum over runs of Huber_delta(log L_hat - log L), delta = 1e-3, by
L-BFGS-B. The objective is not convex, so the optimizer starts from a grid of initial values (the
grid both papers use: alpha, beta in {0, 0.5, ..., 2}, e in {-1, -0.5, ..., 1}, a, b in
{0, 5, ..., 25}); the whole grid is scored at once and L-BFGS runs from its `STARTS` best points.

The objective is the *sum* of Huber losses, scaled by 1/delta^2 so that its values are of order
one per run: Besiroglu et al. traced Hoffmann et al.'s too-narrow intervals to an optimizer that
stopped early because the objective was tiny in absolute terms, and L-BFGS-B's stopping rule is
relative to max(|f|, 1).

Intervals are bootstrap percentiles: `bootstrap` times, the runs are resampled with replacement
(a resample is a vector of counts, so it is the same objective with integer weights) and the law
is refitted, starting from the fit to all runs and from the grid point that scores best on that
resample. `intervals[name]` is the 2.5th and 97.5th percentile of the refitted values.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from marin.scaling_laws.errors import ScalingLawError
from marin.scaling_laws.lbfgs import minimize_batch
from marin.scaling_laws.points import canonical_order, positive_array, same_length

PARAMETERS = ("E", "A", "B", "alpha", "beta")
"""The law's parameters, in the order `LossLawFit.replicates` holds them."""
DERIVED = ("a", "b")
"""The compute-optimal exponents the law implies under C = 6ND: N* ∝ C^a, D* ∝ C^b."""
MIN_POINTS = 5
STARTS = 8
"""L-BFGS runs from this many of the best-scoring grid points (the best of them is kept)."""
CONFIDENCE = 0.95

_GRID_EXPONENTS = np.arange(0.0, 2.01, 0.5)
_GRID_LOG_E = np.arange(-1.0, 1.01, 0.5)
_GRID_LOG_AB = np.arange(0.0, 25.01, 5.0)
_GRID = np.stack(
    [
        axis.ravel()
        for axis in np.meshgrid(
            _GRID_LOG_E, _GRID_LOG_AB, _GRID_LOG_AB, _GRID_EXPONENTS, _GRID_EXPONENTS, indexing="ij"
        )
    ],
    axis=1,
)
"""The initial values, as (e, a, b, alpha, beta): every combination on the papers' grid."""


@dataclass(frozen=True)
class LossLawFit:
    """A fitted L(N, D) = E + A/N^alpha + B/D^beta, with bootstrap intervals when asked for.

    `intervals` maps each of E, A, B, alpha, beta and the implied exponents a, b to a 95% interval
    `(lo, hi)`; it is empty when the fit had no bootstrap. `replicates` holds the bootstrap's
    refitted (E, A, B, alpha, beta), one row per resample. `residuals` are log L_hat - log L of the
    runs, in the order they were given.
    """

    E: float
    A: float
    B: float
    alpha: float
    beta: float
    n: int
    huber_delta: float
    bootstrap: int
    seed: int
    objective: float
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    replicates: np.ndarray = field(default_factory=lambda: np.empty((0, 5)), repr=False, compare=False)
    residuals: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False, compare=False)

    @property
    def a(self) -> float:
        """N* ∝ C^a under C = 6ND: a = beta / (alpha + beta)."""
        return self.beta / (self.alpha + self.beta)

    @property
    def b(self) -> float:
        """D* ∝ C^b under C = 6ND: b = alpha / (alpha + beta)."""
        return self.alpha / (self.alpha + self.beta)

    def predict(self, params: float | np.ndarray, tokens: float | np.ndarray) -> float | np.ndarray:
        """The law's loss for models of `params` parameters trained on `tokens` tokens."""
        return _law(np.array([self.E, self.A, self.B, self.alpha, self.beta]), params, tokens)

    def optimal(
        self, flops: float, flops_per_token: Callable[[float], float] | None = None
    ) -> tuple[float, float]:
        """The loss-minimizing (params, tokens) at a compute budget of `flops`.

        With C = 6·N·D (the default) the optimum is closed-form: N* = G·(C/6)^a, D* = C/(6·N*),
        G = (alpha·A / (beta·B))^(1/(alpha+beta)). `flops_per_token(N)` replaces 6·N with a model
        family's own training FLOPs per token (D = C / flops_per_token(N)); the optimum over N is
        then found numerically, within a factor of 10^4 either side of the 6ND optimum.
        """
        return optimal_split(
            np.array([self.E, self.A, self.B, self.alpha, self.beta]), flops, flops_per_token
        )

    def to_json(self) -> dict:
        """The fit as JSON: parameters, exponents, intervals and how it was fitted."""
        out: dict = {name: getattr(self, name) for name in (*PARAMETERS, *DERIVED)}
        out["intervals"] = {name: list(bounds) for name, bounds in self.intervals.items()}
        out.update(
            n=self.n,
            huber_delta=self.huber_delta,
            bootstrap=self.bootstrap,
            seed=self.seed,
            objective=self.objective,
            confidence=CONFIDENCE if self.intervals else None,
        )
        return out


def fit_loss_law(
    params: Sequence[float] | np.ndarray,
    tokens: Sequence[float] | np.ndarray,
    loss: Sequence[float] | np.ndarray,
    *,
    huber_delta: float = 1e-3,
    bootstrap: int = 0,
    seed: int = 0,
) -> LossLawFit:
    """Fit L(N, D) = E + A/N^alpha + B/D^beta to runs of `params` parameters, `tokens` tokens and final `loss`.

    Approach 3 of Hoffmann et al. (2022) with the replication's choices (Besiroglu et al. 2024):
    a Huber loss on log L with `huber_delta`, L-BFGS from a grid of initial values, and, when
    `bootstrap` > 0, that many bootstrap resamples of the runs for 95% percentile intervals, drawn
    from `seed`. The result does not depend on the order of the runs.
    """
    return fit_loss_laws([(params, tokens, loss)], huber_delta=huber_delta, bootstrap=bootstrap, seed=seed)[0]


def fit_loss_laws(
    datasets: Sequence[tuple[Sequence[float], Sequence[float], Sequence[float]]],
    *,
    huber_delta: float = 1e-3,
    bootstrap: int = 0,
    seed: int = 0,
) -> list[LossLawFit]:
    """`fit_loss_law` of each `(params, tokens, loss)` in `datasets`, computed together.

    Item i equals `fit_loss_law(*datasets[i], ...)` with the same `seed` (to rounding). One law per
    evaluation domain or per metric is the use: every optimizer iteration then serves all of them,
    which is much faster than fitting them one after another when each has few runs.
    """
    where = "fit_loss_law"
    if not (isinstance(huber_delta, int | float) and huber_delta > 0 and math.isfinite(huber_delta)):
        raise ScalingLawError(f"{where}: huber_delta must be a positive number, got {huber_delta!r}")
    if isinstance(bootstrap, bool) or not isinstance(bootstrap, int) or bootstrap < 0:
        raise ScalingLawError(f"{where}: bootstrap must be a whole number >= 0, got {bootstrap!r}")
    if not datasets:
        return []
    runs = [_Runs.checked(*dataset, where=where) for dataset in datasets]
    batch = _Batch(runs, float(huber_delta))
    count, width = len(runs), batch.width

    starts, own_best, counts = [], [], []
    for d, dataset in enumerate(runs):
        grid = batch.internal(_GRID, d)
        per_point = batch.grid_losses(grid, d)  # (grid points, runs)
        starts.append(grid[_best(per_point.sum(axis=1), STARTS)])
        if bootstrap:
            n = dataset.n
            drawn = np.random.default_rng(seed).multinomial(n, np.full(n, 1.0 / n), size=bootstrap)
            drawn = drawn.astype(np.float64)
            own_best.append(grid[np.argmin(per_point @ drawn.T, axis=0)])
            counts.append(np.pad(drawn, ((0, 0), (0, width - n))))

    owner = np.repeat(np.arange(count), STARTS)
    fits = minimize_batch(batch.objective(owner, batch.mask[owner]), np.concatenate(starts))
    values = fits.values.reshape(count, STARTS)
    if not np.isfinite(values).any(axis=1).all():
        bad = int(np.flatnonzero(~np.isfinite(values).any(axis=1))[0])
        raise ScalingLawError(
            f"{where}: L-BFGS found no finite optimum from any of the {STARTS} starts"
            + (f" (dataset {bad})" if count > 1 else "")
        )
    best = np.argmin(np.where(np.isfinite(values), values, np.inf), axis=1)
    theta = fits.x.reshape(count, STARTS, 5)[np.arange(count), best]
    objective = values[np.arange(count), best]

    replicates = [np.empty((0, 5))] * count
    if bootstrap:
        # each resample starts from the fit to all runs and from its own best grid point
        owner = np.repeat(np.arange(count), 2 * bootstrap)
        x0 = np.concatenate(
            [
                np.concatenate([np.repeat(theta[d][None, :], bootstrap, axis=0), own_best[d]])
                for d in range(count)
            ]
        )
        weights = np.concatenate([np.concatenate([c, c]) for c in counts])
        refits = minimize_batch(batch.objective(owner, weights), x0)
        values = refits.values.reshape(count, 2, bootstrap)
        values = np.where(np.isfinite(values), values, np.inf)
        pick = np.argmin(values, axis=1)  # (datasets, resamples): which start won
        x = refits.x.reshape(count, 2, bootstrap, 5)
        replicates = []
        for d in range(count):
            chosen = x[d, pick[d], np.arange(bootstrap)]
            natural = batch.natural(chosen, d)
            natural[~np.isfinite(values[d].min(axis=0))] = np.nan
            replicates.append(natural)

    out = []
    for d, dataset in enumerate(runs):
        E, A, B, alpha, beta = batch.natural(theta[d][None, :], d)[0]
        residuals = np.empty(dataset.n)
        residuals[dataset.order] = batch.log_prediction(theta[d], d) - dataset.z
        out.append(
            LossLawFit(
                E=float(E),
                A=float(A),
                B=float(B),
                alpha=float(alpha),
                beta=float(beta),
                n=dataset.n,
                huber_delta=float(huber_delta),
                bootstrap=bootstrap,
                seed=seed,
                objective=float(objective[d]),
                intervals=_percentile_intervals(replicates[d]) if bootstrap else {},
                replicates=replicates[d],
                residuals=residuals,
            )
        )
    return out


def optimal_split(
    law: np.ndarray, flops: float, flops_per_token: Callable[[float], float] | None = None
) -> tuple[float, float]:
    """The (params, tokens) minimizing the law (E, A, B, alpha, beta) at `flops` (see `LossLawFit.optimal`)."""
    E, A, B, alpha, beta = (float(v) for v in law)
    if not flops > 0:
        raise ScalingLawError(f"optimal: the budget must be a positive number of FLOPs, got {flops!r}")
    if not (alpha > 0 and beta > 0):
        raise ScalingLawError(
            f"optimal: alpha={alpha:.3g}, beta={beta:.3g}; with an exponent at 0 the loss does not trade "
            "parameters against tokens, so there is no optimal split"
        )
    log_g = (math.log(alpha * A) - math.log(beta * B)) / (alpha + beta)
    log_n = log_g + beta / (alpha + beta) * math.log(flops / 6.0)
    if flops_per_token is None:
        return math.exp(log_n), flops / (6.0 * math.exp(log_n))
    from scipy.optimize import minimize_scalar

    def loss_at(log_params: float) -> float:
        params = math.exp(log_params)
        return float(_law(law, params, flops / flops_per_token(params)))

    span = 4 * math.log(10)
    found = minimize_scalar(
        loss_at, bounds=(log_n - span, log_n + span), method="bounded", options={"xatol": 1e-6}
    )
    params = math.exp(found.x)
    return params, flops / flops_per_token(params)


def _law(law: np.ndarray, params, tokens):
    E, A, B, alpha, beta = law
    result = E + A * np.power(params, -alpha) + B * np.power(tokens, -beta)
    return float(result) if np.ndim(result) == 0 else result


@dataclass(frozen=True)
class _Runs:
    """One dataset's runs as log N, log D, log L, sorted (the fit's own order); `order` maps back."""

    x: np.ndarray
    y: np.ndarray
    z: np.ndarray
    order: np.ndarray

    @property
    def n(self) -> int:
        return self.x.size

    @classmethod
    def checked(cls, params, tokens, loss, *, where: str) -> _Runs:
        x = np.log(positive_array(params, "params", where))
        y = np.log(positive_array(tokens, "tokens", where))
        z = np.log(positive_array(loss, "loss", where))
        n = same_length(where, params=x, tokens=y, loss=z)
        if n < MIN_POINTS:
            raise ScalingLawError(
                f"{where}: {n} runs; the law has 5 parameters and needs at least {MIN_POINTS} runs "
                "(several model sizes, each at several token counts)"
            )
        order = canonical_order(x, y, z)
        return cls(x[order], y[order], z[order], order)


class _Batch:
    """The objective of several datasets side by side, in the coordinates the optimizer works in.

    Each dataset's covariates are standardized, u = (log N - mean) / sd and v likewise, and the
    optimizer sees theta = (e, a', b', alpha', beta') with a - alpha log N = a' - alpha' u, that
    is alpha' = alpha sd and a' = a - alpha mean. The law is the same; only its parameterization
    changes, which takes away most of the correlation between a and alpha (and b and beta) that
    slows L-BFGS down. Datasets are padded to the longest with zero-weight runs.
    """

    def __init__(self, runs: list[_Runs], delta: float):
        self.width = max(r.n for r in runs)
        self.mask = np.zeros((len(runs), self.width))
        self.u, self.v, self.z = (np.zeros((len(runs), self.width)) for _ in range(3))
        self.x_mean = np.array([r.x.mean() for r in runs])
        self.x_sd = np.array([r.x.std() or 1.0 for r in runs])
        self.y_mean = np.array([r.y.mean() for r in runs])
        self.y_sd = np.array([r.y.std() or 1.0 for r in runs])
        for d, r in enumerate(runs):
            self.mask[d, : r.n] = 1.0
            self.u[d, : r.n] = (r.x - self.x_mean[d]) / self.x_sd[d]
            self.v[d, : r.n] = (r.y - self.y_mean[d]) / self.y_sd[d]
            self.z[d, : r.n] = r.z
        self.sizes = [r.n for r in runs]
        self.delta = delta
        self.scale = 1.0 / (delta * delta)

    def internal(self, theta: np.ndarray, d: int) -> np.ndarray:
        """(e, a, b, alpha, beta) rows in the optimizer's coordinates for dataset `d`."""
        e, a, b, alpha, beta = theta.T
        xm, xs, ym, ys = self.x_mean[d], self.x_sd[d], self.y_mean[d], self.y_sd[d]
        return np.stack([e, a - alpha * xm, b - beta * ym, alpha * xs, beta * ys], axis=1)

    def natural(self, internal: np.ndarray, d: int) -> np.ndarray:
        """Optimizer rows of dataset `d` as (E, A, B, alpha, beta)."""
        e, a2, b2, alpha2, beta2 = internal.T
        alpha, beta = alpha2 / self.x_sd[d], beta2 / self.y_sd[d]
        a, b = a2 + alpha * self.x_mean[d], b2 + beta * self.y_mean[d]
        with np.errstate(over="ignore"):
            return np.stack([np.exp(e), np.exp(a), np.exp(b), alpha, beta], axis=1)

    def log_prediction(self, theta: np.ndarray, d: int) -> np.ndarray:
        e, a, b, alpha, beta = theta
        n = self.sizes[d]
        return np.logaddexp(np.logaddexp(a - alpha * self.u[d, :n], b - beta * self.v[d, :n]), e)

    def grid_losses(self, grid: np.ndarray, d: int) -> np.ndarray:
        """Huber loss of each run of dataset `d` at every grid point: shape (grid points, runs)."""
        n = self.sizes[d]
        e, a, b, alpha, beta = (grid[:, i : i + 1] for i in range(5))
        pred = np.logaddexp(np.logaddexp(a - alpha * self.u[d, :n], b - beta * self.v[d, :n]), e)
        return self._huber(pred - self.z[d, :n])

    def _huber(self, r: np.ndarray) -> np.ndarray:
        d = self.delta
        absolute = np.abs(r)
        return self.scale * np.where(absolute <= d, 0.5 * r * r, d * (absolute - 0.5 * d))

    def objective(self, owner: np.ndarray, weights: np.ndarray):
        """The batched objective for `minimize_batch`: problem i fits dataset `owner[i]`, its runs
        weighted by `weights[i]`."""
        single = len(self.sizes) == 1  # then the covariates broadcast instead of being gathered per problem

        def value_and_gradient(theta: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            w = weights[rows]
            which = slice(0, 1) if single else owner[rows]
            u, v, z = self.u[which], self.v[which], self.z[which]
            e, a, b, alpha, beta = (theta[:, i : i + 1] for i in range(5))
            t1 = a - alpha * u
            t2 = b - beta * v
            top = np.maximum(np.maximum(t1, t2), e)
            with np.errstate(over="ignore", invalid="ignore"):
                s1, s2, s3 = np.exp(t1 - top), np.exp(t2 - top), np.exp(e - top)
                total = s1 + s2 + s3
                r = top + np.log(total) - z
                values = np.einsum("ij,ij->i", w, self._huber(r))
                g = w * np.clip(r, -self.delta, self.delta) * self.scale / total
                g1, g2 = g * s1, g * s2
                gradients = np.stack(
                    [
                        np.einsum("ij,ij->i", g, s3),
                        g1.sum(axis=1),
                        g2.sum(axis=1),
                        -np.einsum("ij,ij->i", g1, np.broadcast_to(u, g1.shape)),
                        -np.einsum("ij,ij->i", g2, np.broadcast_to(v, g2.shape)),
                    ],
                    axis=1,
                )
            return values, gradients

        return value_and_gradient


def _best(values: np.ndarray, k: int) -> np.ndarray:
    """Indices of the `k` lowest values, lowest first (ties by index, so the choice is deterministic)."""
    k = min(k, values.size)
    return np.argsort(values, kind="stable")[:k]


def _percentile_intervals(replicates: np.ndarray) -> dict[str, tuple[float, float]]:
    """The 2.5th and 97.5th percentiles of each parameter and of the implied exponents a and b."""
    finite = replicates[np.all(np.isfinite(replicates), axis=1)]
    alpha, beta = finite[:, 3], finite[:, 4]
    columns = {name: finite[:, i] for i, name in enumerate(PARAMETERS)}
    with np.errstate(invalid="ignore", divide="ignore"):
        columns["a"] = beta / (alpha + beta)
        columns["b"] = alpha / (alpha + beta)
    tail = 100 * (1 - CONFIDENCE) / 2
    intervals = {}
    for name, values in columns.items():
        values = values[np.isfinite(values)]
        if values.size:
            lo, hi = np.percentile(values, [tail, 100 - tail])
            intervals[name] = (float(lo), float(hi))
    return intervals
