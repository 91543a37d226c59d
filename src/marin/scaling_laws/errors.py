"""The error a scaling-law fit raises on bad input; its message is one line naming what is wrong."""

from __future__ import annotations

from marin.execution.errors import MarinError


class ScalingLawError(MarinError, ValueError):
    """Input a fit cannot use (too few points, a non-positive N, D or loss, a run without the metric,
    a budget with too few sizes); the message names the point, run or budget and what to do."""
