"""Runs drawn from a known scaling law: the truth the fits' tests check their estimates against."""

from __future__ import annotations

import numpy as np

# Epoch AI's refit of Chinchilla's data (Besiroglu et al. 2024)
LAW = {"E": 1.82, "A": 482.0, "B": 2085.0, "alpha": 0.35, "beta": 0.37}
A_EXPONENT = LAW["beta"] / (LAW["alpha"] + LAW["beta"])  # N* ∝ C^a under C = 6ND
B_EXPONENT = LAW["alpha"] / (LAW["alpha"] + LAW["beta"])


def law_loss(params, tokens):
    return LAW["E"] + LAW["A"] * np.power(params, -LAW["alpha"]) + LAW["B"] * np.power(tokens, -LAW["beta"])


def optimum(flops: float) -> float:
    """The true loss-optimal N at `flops` (C = 6ND)."""
    g = (LAW["alpha"] * LAW["A"] / (LAW["beta"] * LAW["B"])) ** (1 / (LAW["alpha"] + LAW["beta"]))
    return g * (flops / 6) ** A_EXPONENT


def isoflop_design(budgets: int = 4, sizes: int = 5, span: float = 1.0):
    """(C, N, D) of an isoflop grid: `sizes` models per budget, log-spaced within 10^span of the optimum."""
    c, n = [], []
    for flops in np.logspace(18, 21, budgets):
        for factor in np.logspace(-span, span, sizes):
            c.append(flops)
            n.append(optimum(flops) * factor)
    c, n = np.array(c), np.array(n)
    return c, n, c / (6 * n)


def noisy(loss: np.ndarray, seed: int, sigma: float = 0.01) -> np.ndarray:
    """`loss` with multiplicative noise of `sigma` (log-normal), seeded."""
    return loss * np.exp(np.random.default_rng(seed).normal(0.0, sigma, loss.shape))
