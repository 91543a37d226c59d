"""Scaling laws: fits of final loss against model size, tokens and compute, with intervals.

- `fit_loss_law` (Approach 3 of Hoffmann et al. 2022, as Besiroglu et al. 2024 replicated it):
  L(N, D) = E + A/N^alpha + B/D^beta with bootstrap intervals on every parameter;
- `fit_isoflop` (Approach 2): a parabola in log N per compute budget, then N*(C) ∝ C^a and
  D*(C) ∝ C^b with intervals.

Importing this package loads numpy only; scipy loads when a fit needs it.
"""

from marin.scaling_laws.errors import ScalingLawError
from marin.scaling_laws.isoflop import BudgetOptimum, IsoflopFit, PowerLaw, fit_isoflop
from marin.scaling_laws.loss_law import LossLawFit, fit_loss_law, fit_loss_laws

__all__ = [
    "BudgetOptimum",
    "IsoflopFit",
    "LossLawFit",
    "PowerLaw",
    "ScalingLawError",
    "fit_isoflop",
    "fit_loss_law",
    "fit_loss_laws",
]
