"""L-BFGS over a batch of independent problems at once, in numpy.

A bootstrap refits the same small objective (five parameters) to a thousand resamples, and the fit
itself runs from several starting points. scipy's L-BFGS-B solves one problem per call and spends
most of its time per iteration outside the objective, so a thousand calls cost tens of seconds; and
stacking the problems into one large one makes L-BFGS mix their curvature and crawl. Here each
problem keeps its own memory of the last `memory` steps and its own step length, and every
iteration evaluates the objective of all problems still running in one vectorized call.

The method is textbook L-BFGS (Nocedal and Wright, algorithm 7.4, the two-loop recursion) with a
backtracking line search on the Armijo condition; a step whose curvature s.y is not positive is not
remembered, which keeps the implied Hessian positive definite. tests/marin/scaling_laws check it
reaches the optimum scipy's L-BFGS-B finds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

LADDER = 2
"""Step lengths a line search tries at once after the first is rejected."""

Objective = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
"""`fun(x, rows) -> (values, gradients)`: x has shape (k, p), one point per problem in `rows`
(indices into the batch); values has shape (k,), gradients (k, p)."""


@dataclass(frozen=True)
class BatchResult:
    """The minimizers `x` (shape (problems, p)), their objective values, and iterations taken."""

    x: np.ndarray
    values: np.ndarray
    iterations: np.ndarray


def minimize_batch(
    fun: Objective,
    x0: np.ndarray,
    *,
    memory: int = 10,
    max_iter: int = 1000,
    ftol: float = 1e-13,
    gtol: float = 1e-9,
    max_halvings: int = 50,
) -> BatchResult:
    """Minimize each of `len(x0)` problems from its row of `x0`.

    A problem stops when its largest gradient component is below `gtol`·max(1, |f|), when a step
    lowers f by less than `ftol`·max(1, |f|), when no step length satisfies the Armijo condition,
    or after `max_iter` iterations.
    """
    x = np.array(x0, dtype=np.float64)
    count, dim = x.shape
    every = np.arange(count)
    f, g = fun(x, every)
    s_hist = np.zeros((memory, count, dim))
    y_hist = np.zeros((memory, count, dim))
    rho = np.zeros((memory, count))  # 0 marks an empty or forgotten pair: the recursion skips it
    gamma = np.ones(count)
    slot = 0
    iterations = np.zeros(count, dtype=np.int64)
    active = np.isfinite(f) & np.all(np.isfinite(g), axis=1)
    active &= np.abs(g).max(axis=1) > gtol * np.maximum(1.0, np.abs(f))
    for _ in range(max_iter):
        rows = np.flatnonzero(active)
        if rows.size == 0:
            break
        direction = _two_loop(
            g[rows], s_hist[:, rows], y_hist[:, rows], rho[:, rows], gamma[rows], slot, memory
        )
        slope = np.einsum("ij,ij->i", direction, g[rows])
        uphill = ~(slope < 0)
        if uphill.any():  # the memory no longer describes the function here: start afresh
            direction[uphill] = -g[rows][uphill]
            slope[uphill] = -np.einsum("ij,ij->i", g[rows][uphill], g[rows][uphill])
            rho[:, rows[uphill]] = 0.0
            gamma[rows[uphill]] = 1.0
        first = iterations[rows] == 0
        step = np.where(first, 1.0 / np.maximum(1.0, np.abs(g[rows]).sum(axis=1)), 1.0)
        found, new_f, new_g = _line_search(fun, x[rows], f[rows], slope, direction, step, rows, max_halvings)
        moved = rows[found]
        s = step[found, None] * direction[found]
        y = new_g[found] - g[moved]
        curvature = np.einsum("ij,ij->i", s, y)
        keep = curvature > 1e-12 * np.einsum("ij,ij->i", y, y)
        s_hist[slot, moved] = s
        y_hist[slot, moved] = y
        rho[slot, moved] = np.where(keep, 1.0 / np.where(keep, curvature, 1.0), 0.0)
        gamma[moved[keep]] = curvature[keep] / np.einsum("ij,ij->i", y[keep], y[keep])
        rho[slot, rows[~found]] = 0.0
        slot = (slot + 1) % memory
        scale = np.maximum(1.0, np.abs(f[moved]))
        small_drop = f[moved] - new_f[found] <= ftol * scale
        x[moved] += s
        f[moved] = new_f[found]
        g[moved] = new_g[found]
        iterations[rows] += 1
        flat = np.abs(g[moved]).max(axis=1) <= gtol * np.maximum(1.0, np.abs(f[moved]))
        active[rows[~found]] = False
        active[moved[small_drop | flat]] = False
    return BatchResult(x=x, values=f, iterations=iterations)


def _line_search(
    fun: Objective,
    x: np.ndarray,
    f: np.ndarray,
    slope: np.ndarray,
    direction: np.ndarray,
    step: np.ndarray,
    rows: np.ndarray,
    max_halvings: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Backtracking on the Armijo condition f(x + t d) <= f(x) + 1e-4 t f'(x; d), halving t.

    `step` (the first t of each problem) is updated in place to the accepted t. The first trial is
    t itself; a problem that rejects it tries the next `LADDER` halvings in one batched evaluation
    and takes the longest that passes, and so on: every problem waits for the slowest in each
    round, so fewer, wider rounds cost less than one halving per round.
    """
    count, dim = direction.shape
    found = np.zeros(count, dtype=bool)
    new_f = np.empty(count)
    new_g = np.empty((count, dim))
    pending = np.arange(count)
    tried, ladder = 0, 1
    while pending.size and tried < max_halvings:
        factors = 0.5 ** np.arange(ladder)
        trial_steps = (step[pending, None] * factors[None, :]).ravel()
        owner = np.repeat(pending, ladder)
        tf, tg = fun(x[owner] + trial_steps[:, None] * direction[owner], rows[owner])
        ok = np.isfinite(tf) & (tf <= f[owner] + 1e-4 * trial_steps * slope[owner])
        ok &= np.all(np.isfinite(tg), axis=1)
        ok = ok.reshape(pending.size, ladder)
        passed = ok.any(axis=1)
        first_ok = np.argmax(ok, axis=1)
        picked = np.arange(pending.size) * ladder + first_ok
        accepted = pending[passed]
        found[accepted] = True
        new_f[accepted] = tf[picked[passed]]
        new_g[accepted] = tg[picked[passed]]
        step[accepted] = trial_steps[picked[passed]]
        pending = pending[~passed]
        step[pending] *= 0.5**ladder
        tried += ladder
        ladder = LADDER
    return found, new_f, new_g


def _two_loop(
    g: np.ndarray,
    s_hist: np.ndarray,
    y_hist: np.ndarray,
    rho: np.ndarray,
    gamma: np.ndarray,
    slot: int,
    memory: int,
) -> np.ndarray:
    """-H·g for each problem, H the L-BFGS inverse-Hessian estimate from its remembered pairs."""
    q = g.copy()
    newest_first = [(slot - 1 - i) % memory for i in range(memory)]
    alphas = {}
    for i in newest_first:
        alphas[i] = rho[i] * np.einsum("ij,ij->i", s_hist[i], q)
        q -= alphas[i][:, None] * y_hist[i]
    r = gamma[:, None] * q
    for i in reversed(newest_first):
        beta = rho[i] * np.einsum("ij,ij->i", y_hist[i], r)
        r += s_hist[i] * (alphas[i] - beta)[:, None]
    return -r
