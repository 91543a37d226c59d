"""Checking and ordering the (N, D, loss) points a fit is given.

Every fit sorts its points first, so that its result does not depend on the order of the runs:
the objective is a floating-point sum, and a different order of its terms would move the optimizer
along a slightly different path.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from marin.scaling_laws.errors import ScalingLawError


def positive_array(values: Sequence[float] | np.ndarray, name: str, where: str) -> np.ndarray:
    """`values` as a float64 vector, each a positive finite number (else one line naming the first bad one)."""
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ScalingLawError(f"{where}: {name} must be numbers, got {values!r:.80}") from None
    if array.ndim != 1:
        raise ScalingLawError(f"{where}: {name} must be a flat sequence of numbers, got shape {array.shape}")
    bad = np.flatnonzero(~(np.isfinite(array) & (array > 0)))
    if bad.size:
        i = int(bad[0])
        raise ScalingLawError(
            f"{where}: {name}[{i}] = {_show(array[i])}; every N, D and loss must be a positive finite number "
            f"({bad.size} of {array.size} are not): drop that run or fix its record"
        )
    return array


def same_length(where: str, **arrays: np.ndarray) -> int:
    """The common length of `arrays`, or one line naming the lengths that differ."""
    lengths = {name: len(array) for name, array in arrays.items()}
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"{name} has {n}" for name, n in lengths.items())
        raise ScalingLawError(f"{where}: the inputs differ in length ({shown}); give one value per run")
    return next(iter(lengths.values()))


def canonical_order(*columns: np.ndarray) -> np.ndarray:
    """The permutation that sorts points by their columns (first column first): a fit's own order."""
    return np.lexsort(tuple(reversed(columns)))


def _show(value: float) -> str:
    return repr(float(value)) if math.isfinite(value) else str(value)
