"""Which metrics can tell these models apart: signal-to-noise, and tasks at chance for every model.

As Heineman et al. (2025, *Signal and Noise*) define them for a metric over a set of models:

- **signal**: the relative dispersion of the models' scores, (max - min) / |mean|;
- **noise**: the relative standard deviation of one model's score under training noise, sd / |mean|:
  between seeds of a configuration when there are replicates (the pooled seed standard deviation),
  else between its last checkpoints (the standard deviation of the last `CHECKPOINTS` points of each
  model's checkpoint curve, averaged over models), else unmeasured;
- **SNR** = signal / noise. A metric whose SNR is near or below a few cannot rank these models: the
  gaps between them are the size of what a reseed or one more checkpoint changes.

A task is **at chance** when every model's 95% interval contains a random guesser's score (the chance
its results record, as the suites and our own tasks do): it cannot rank them at this scale whatever
its SNR.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from marin.evaluation.comparison import ConfigurationMetric, Group

CHECKPOINTS = 3  # the last checkpoints whose spread is a model's checkpoint-to-checkpoint noise


@dataclass(frozen=True)
class SignalNoise:
    """One metric's signal, noise (and where it was measured) and their ratio over the columns compared,
    and whether it is at chance for every one of the `models` evaluated (`chance`: a guesser's score)."""

    metric: str
    models: int
    signal: float | None
    noise: float | None
    noise_from: str  # "seeds", "checkpoints" or "unmeasured"
    snr: float | None
    chance: float | None
    at_chance: bool

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def verdict(self) -> str:
        """One line a researcher reads: can this metric rank these models?"""
        if self.at_chance:
            return (
                f"at chance ({self.chance:g}) for all {self.models} models: it cannot rank them at this scale"
            )
        if self.snr is None:
            return "noise unmeasured: train replicates (or evaluate checkpoints) to know whether it can rank them"
        if self.snr < 2:
            return "the gaps between models are within training noise: it cannot rank them"
        return "separates these models beyond training noise"


def signal_noise(
    columns: Sequence[Group], metrics: Sequence[str], configuration_metrics: Sequence[ConfigurationMetric]
) -> list[SignalNoise]:
    """Per metric, its signal-to-noise over the columns (configurations, or single models)."""
    out = []
    for metric in metrics:
        values = _column_values(columns, metric, configuration_metrics)
        if len(values) < 2:
            continue
        mean = float(np.mean(values))
        signal = (max(values) - min(values)) / abs(mean) if mean else None
        noise, source = _noise(columns, metric, mean)
        members = [m for g in columns for m in g.members if metric in m.metrics]
        chance = next((m.chance[metric] for m in members if metric in m.chance), None)
        at_chance = chance is not None and all(_contains(m.metrics[metric].ci95, chance) for m in members)
        snr = signal / noise if signal is not None and noise else None
        out.append(SignalNoise(metric, len(members), signal, noise, source, snr, chance, at_chance))
    return out


def _column_values(columns, metric: str, rows) -> list[float]:
    by_config = {r.configuration: r.value for r in rows if r.metric == metric}
    values = []
    for g in columns:
        if g.label in by_config:
            values.append(by_config[g.label])
        elif all(metric in m.metrics and m.metrics[metric].value is not None for m in g.members):
            values.append(float(np.mean([m.metrics[metric].value for m in g.members])))
    return [v for v in values if math.isfinite(v)]


def _noise(columns, metric: str, mean: float) -> tuple[float | None, str]:
    """The relative training noise of one model's score: pooled seed sd, else the last checkpoints' sd."""
    if not mean:
        return None, "unmeasured"
    squares, df = 0.0, 0
    for g in columns:
        values = [m.metrics[metric].value for m in g.members if metric in m.metrics]
        values = [v for v in values if v is not None]
        if len(values) > 1:
            squares += float(np.var(values, ddof=1)) * (len(values) - 1)
            df += len(values) - 1
    if df:
        return math.sqrt(squares / df) / abs(mean), "seeds"
    spreads = [
        float(np.std(m.curves[metric][-CHECKPOINTS:], ddof=1))
        for g in columns
        for m in g.members
        if len(m.curves.get(metric, ())) >= CHECKPOINTS and None not in m.curves[metric][-CHECKPOINTS:]
    ]
    if spreads:
        return float(np.mean(spreads)) / abs(mean), "checkpoints"
    return None, "unmeasured"


def _contains(ci: tuple[float | None, float | None] | None, x: float) -> bool:
    return ci is not None and ci[0] is not None and ci[1] is not None and ci[0] <= x <= ci[1]
