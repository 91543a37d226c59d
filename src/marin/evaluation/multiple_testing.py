"""Adjusting p-values when many tests are read at once (metrics x pairs of configurations).

At 95% each test of two equal configurations says "different" one time in twenty; a table of twenty
tests then holds a false "better" more often than not. `holm` controls the chance of any false
"better" in the table (the family-wise error rate; Holm's step-down, uniformly more powerful than
Bonferroni's and valid under any dependence between the tests); `benjamini_hochberg` controls the
expected share of false ones among those called better (the false discovery rate), for screening many
metrics. Both equal statsmodels' `multipletests(method="holm" / "fdr_bh")` (the tests check it).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

import numpy as np


class Adjustment(StrEnum):
    """How a table's p-values are adjusted for the number of tests in it."""

    HOLM = "holm"
    BH = "bh"  # Benjamini-Hochberg
    NONE = "none"

    def describe(self) -> str:
        """How a table names the adjustment."""
        return {
            Adjustment.HOLM: "Holm (family-wise error)",
            Adjustment.BH: "Benjamini-Hochberg (false discovery rate)",
            Adjustment.NONE: "none",
        }[self]


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values: the i-th smallest times (m - i), made monotone, at most 1."""
    p = np.asarray(p_values, dtype=np.float64)
    m = len(p)
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    scaled = np.maximum.accumulate(p[order] * (m - np.arange(m)))
    out = np.empty(m)
    out[order] = np.minimum(scaled, 1.0)
    return out


def benjamini_hochberg(p_values: Sequence[float]) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values: the i-th smallest times m / i, made monotone from the top."""
    p = np.asarray(p_values, dtype=np.float64)
    m = len(p)
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    scaled = p[order] * m / np.arange(1, m + 1)
    scaled = np.minimum.accumulate(scaled[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(scaled, 1.0)
    return out


def adjust(p_values: Sequence[float], how: Adjustment) -> np.ndarray:
    """The p-values adjusted by `how` (NaN, a test that could not be made, stays NaN and is not counted)."""
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(len(p), np.nan)
    made = ~np.isnan(p)
    if how == Adjustment.NONE:
        out[made] = p[made]
    else:
        out[made] = (holm if how == Adjustment.HOLM else benjamini_hochberg)(p[made])
    return out
