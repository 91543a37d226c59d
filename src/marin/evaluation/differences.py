"""The tests a comparison makes, metric by metric: between configurations over their seeds (seed and item
noise, `marin.evaluation.configurations`), between two models on their shared items (the paired
bootstrap, McNemar's test), the seed noise between replicates of one configuration, the adjustment of
a table's p-values for their number, and the power figures.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from marin.evaluation import configurations, stats
from marin.evaluation.comparison import (
    ALPHA,
    NOT_TESTED,
    ConfigurationMetric,
    Difference,
    Evaluated,
    Group,
    Kind,
    PowerRow,
)
from marin.evaluation.errors import EvalDataError
from marin.evaluation.multiple_testing import Adjustment, adjust
from marin.evaluation.power import Spreads
from marin.evaluation.results import MetricResult


def configuration_means(
    groups: Sequence[Group], metric: str, iters: int = stats.ITERS, seed: int = stats.SEED
) -> list[ConfigurationMetric]:
    """Each configuration's mean of `metric` over its seeds, with its interval (seed and item noise)."""
    return configuration_level(groups, metric, iters, seed, unpaired=False)[0]


def tested(evaluations: Sequence[Evaluated], metric: str) -> bool:
    first = next((e.metrics[metric] for e in evaluations if metric in e.metrics), None)
    return first is not None and first.aggregation not in NOT_TESTED


def _aligned(
    group: Group, metric: str, ids: tuple | None
) -> tuple[tuple, np.ndarray, np.ndarray, float] | None:
    """The group's per-item (numerator, denominator) columns of `metric`, (n, S) each, in the order of
    `ids` (the first member's when None); None when a member has no per-item scores of it."""
    scores = [m.items.get(metric) for m in group.members]
    if any(s is None for s in scores):
        return None
    order = ids if ids is not None else scores[0].ids
    for m, s in zip(group.members, scores, strict=True):
        if set(s.ids) != set(order):
            raise EvalDataError(
                f"{m.label} scored other items on {metric!r} than {group.members[0].label}: "
                f"{_unshared(s.ids, order)}; compare evaluations of the same task and data, or pass "
                "--unpaired to compare them as independent samples"
            )
    columns = [s.aligned(order) for s in scores]
    return order, np.stack([c[0] for c in columns], 1), np.stack([c[1] for c in columns], 1), scores[0].scale


def _unshared(a: Sequence, b: Sequence) -> str:
    only_a, only_b = len(set(a) - set(b)), len(set(b) - set(a))
    return f"{only_a} item(s) only in the first, {only_b} only in the second"


def configuration_level(
    groups: Sequence[Group], metric: str, iters: int, seed: int, unpaired: bool
) -> tuple[list[ConfigurationMetric], list[Difference], list[configurations.Spread] | None]:
    """Each configuration's mean of `metric` and every pair's difference (see `configurations`)."""
    present = [g for g in groups if all(metric in m.metrics for m in g.members)]
    if not present:
        return [], [], None
    tested = present[0].members[0].metrics[metric].aggregation not in NOT_TESTED
    spreads, items = _spreads(present, metric, iters, seed, unpaired)
    pool = configurations.pooled(spreads)
    rows, used = [], []
    for g, s in zip(present, spreads, strict=True):
        source = "measured" if s.seeds > 1 else ("borrowed" if pool is not None else "unmeasured")
        used_spread = s.borrowing(pool) if s.seeds == 1 and pool is not None else s
        used.append(used_spread)
        estimate = configurations.mean_estimate(used_spread, items)
        values = [_value(m.metrics[metric]) for m in g.members]
        rows.append(
            ConfigurationMetric(
                g.label,
                metric,
                float(estimate.value),
                _finite(estimate.stderr),
                _interval(estimate.ci95),
                _finite(estimate.df),
                len(g.members),
                _finite(np.std(values, ddof=1)) if len(values) > 1 else None,
                items,
                source,
            )
        )
    diffs = []
    if tested:
        paired = not unpaired and used[0].mean_replicates is not None
        test = "two-level t (seeds, items)" if used[0].mean_replicates is not None else "Welch t (seeds)"
        higher = present[0].members[0].metrics[metric].higher_is_better
        for (ga, a), (gb, b) in itertools.combinations(zip(present, used, strict=True), 2):
            estimate = configurations.difference_estimate(a, b, items, paired=paired)
            value = float(estimate.value)
            diffs.append(
                Difference(
                    Kind.CONFIGURATION,
                    metric,
                    ga.label,
                    gb.label,
                    value,
                    _finite(estimate.stderr),
                    _interval(estimate.ci95),
                    items,
                    test,
                    p_value=_finite(estimate.p_value),
                    df=_finite(estimate.df),
                    better=(ga.label if (value > 0) == higher else gb.label),  # kept only where significant
                )
            )
    if len(present) == 1 and len(present[0].members) > 1:
        diffs += _seed_noise(present[0], metric, iters, seed, unpaired)
    return rows, diffs, used


def _spreads(
    groups: Sequence[Group], metric: str, iters: int, seed: int, unpaired: bool
) -> tuple[list[configurations.Spread], int]:
    """Each group's spread of `metric` over its seeds, with item resamples when every member has per-item
    scores: the same draws for every seed and, unless `unpaired`, for every configuration."""
    points = [np.array([_value(m.metrics[metric]) for m in g.members], dtype=np.float64) for g in groups]
    aligned = []
    ids = None
    for g in groups:
        found = _aligned(g, metric, None if unpaired else ids)
        if found is None:
            return [configurations.spread(p) for p in points], _items(groups, metric)
        ids = ids or found[0]
        aligned.append(found)
    if unpaired:
        replicates = [
            _ratio_replicates(a[1], a[2], a[3], iters, seed + i * stats.STRATUM_SEED_STRIDE)
            for i, a in enumerate(aligned)
        ]
    else:
        num = np.concatenate([a[1] for a in aligned], axis=1)
        den = np.concatenate([a[2] for a in aligned], axis=1)
        everything = _ratio_replicates(num, den, aligned[0][3], iters, seed)
        bounds = np.cumsum([0] + [a[1].shape[1] for a in aligned])
        replicates = [everything[:, lo:hi] for lo, hi in itertools.pairwise(bounds)]
    spreads = [configurations.spread(p, r) for p, r in zip(points, replicates, strict=True)]
    return spreads, len(ids)


def _ratio_replicates(num: np.ndarray, den: np.ndarray, scale: float, iters: int, seed: int) -> np.ndarray:
    """(iters, S): each seed's metric under each resample of the items, the same draws for every column."""
    seeds = num.shape[1]
    sums = stats.resampled_sums(np.concatenate([num, den], axis=1), iters, seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        return scale * sums[:, :seeds] / sums[:, seeds:]


def _items(groups: Sequence[Group], metric: str) -> int:
    return min(m.metrics[metric].n for g in groups for m in g.members)


def _seed_noise(group: Group, metric: str, iters: int, seed: int, unpaired: bool) -> list[Difference]:
    """The differences between replicates of one configuration: seed noise, with no test and no better."""
    out = []
    for a, b in itertools.combinations(group.members, 2):
        found = model_difference(a, b, metric, iters, seed, unpaired)
        if found is not None:
            out.append(
                dataclasses.replace(found, kind=Kind.SEED_NOISE, test="seed noise", p_value=None, better=None)
            )
    return out


def model_difference(
    a: Evaluated, b: Evaluated, metric: str, iters: int, seed: int, unpaired: bool
) -> Difference | None:
    """a - b of two models on the items they share (paired), or on their own items (`unpaired`)."""
    x, y = a.items.get(metric), b.items.get(metric)
    if x is None or y is None or a.metrics[metric].aggregation in NOT_TESTED:
        return None
    if unpaired:
        diff = stats.unpaired_difference(x, y, iters, seed)
    elif set(x.ids) != set(y.ids):
        raise EvalDataError(
            f"{a.label} and {b.label} scored different items on {metric!r} ({_unshared(x.ids, y.ids)}): a paired "
            "difference needs the same items; compare evaluations of the same task and data, or pass "
            "--unpaired to compare them as independent samples"
        )
    else:
        diff = stats.paired_difference(x, y, iters, seed)
    value = diff.difference.value
    higher = a.metrics[metric].higher_is_better
    return Difference(
        Kind.MODEL,
        metric,
        a.label,
        b.label,
        float(value),
        diff.difference.stderr,
        diff.difference.ci95,
        diff.difference.n,
        diff.test,
        p_value=diff.p_value,
        better=(a.label if (value > 0) == higher else b.label),
        a_only=diff.a_only,
        b_only=diff.b_only,
    )


def adjusted(differences: list[Difference], how: Adjustment) -> list[Difference]:
    """Every tested difference's p-value adjusted over the table's tests; `better` kept only where significant."""
    adjusted = adjust([d.p_value if d.p_value is not None else math.nan for d in differences], how)
    out = []
    for d, p in zip(differences, adjusted, strict=True):
        p_adjusted = None if math.isnan(p) else float(p)
        better = d.better if p_adjusted is not None and p_adjusted < ALPHA else None
        out.append(dataclasses.replace(d, p_adjusted=p_adjusted, better=better))
    return out


def power_row(
    metric: str, delta: float, used: list[configurations.Spread], groups: Sequence[Group]
) -> PowerRow:
    """The seeds and items a difference of `delta` needs, from the spreads the configurations measured."""
    pool = configurations.pooled(used)
    items = _items(groups, metric)
    noise = float(np.nan_to_num(pool.item_noise)) if pool is not None else 0.0
    seed_variance = max(float(pool.seed_variance) - noise, 0.0) if pool is not None else 0.0
    interactions = []
    for a, b in itertools.combinations(used, 2):
        if a.mean_replicates is not None and b.mean_replicates is not None:
            interactions.append(
                float(configurations.item_term(a.mean_replicates, b.mean_replicates, [a, b], True))
            )
    spreads = Spreads(
        math.sqrt(seed_variance),
        math.sqrt(noise * items),
        math.sqrt(np.mean(interactions or [0.0]) * items),
        items,
    )
    seeds = max(2, min(len(g.members) for g in groups))
    return PowerRow(
        metric,
        delta,
        spreads.seed,
        spreads.noise,
        spreads.interaction,
        items,
        seeds,
        spreads.power(delta, seeds),
        spreads.seeds_needed(delta),
        spreads.items_needed(delta, seeds),
    )


def _value(metric: MetricResult) -> float:
    return math.nan if metric.value is None else metric.value


def _finite(x: Any) -> float | None:
    value = float(x)
    return value if math.isfinite(value) else None


def _interval(ci: tuple[Any, Any]) -> tuple[float, float] | None:
    lo, hi = _finite(ci[0]), _finite(ci[1])
    return None if lo is None or hi is None else (lo, hi)
