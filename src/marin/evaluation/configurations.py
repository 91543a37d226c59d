"""Configuration-level estimates: a configuration's mean over its seeds, and the difference between two
configurations, each with an interval that counts both the training noise (seeds) and the item noise.

A configuration (a model, data and recipe) trained with S seeds is evaluated on n items, the same for
every seed. Write a model's score on an item as

    y[s, i] = mu + a[s] + b[i] + g[i] + e[s, i]

with `a` the seed's effect (initialisation, data order), `b` the item's difficulty (the same for every
model), `g` how this configuration fares on the item compared with another (configuration x item), and
`e` which items this particular model happens to get right. A model's metric is a mean (or a ratio of
sums) over the items; the configuration's estimate is the mean of its seeds' metrics. Its variance
has two levels:

- **seeds**: the sample variance of the seeds' metrics over S, `s^2 / S`. It holds the seed effect
  and `e`'s share (`sigma_e^2 / n` per seed), and it is unbiased whatever the number of seeds;
- **items**: the variance of the seed mean over resamples of the items (the bootstrap, drawing the
  same items for every seed, and, for a paired difference, for both configurations). It holds `b`
  and `g` (for a difference between configurations on the same items `b` cancels), and `e` again.

`e` is in both: its share, `sigma_e^2 / (n S)`, is measured within the configuration (how the seeds'
bootstrap replicates spread around their mean: only `e` moves them apart) and counted once. The
standard error is sqrt(seeds + items - overlap); the interval is the t interval on the
Welch-Satterthwaite degrees of freedom (S - 1 for the seed term, n - 1 for the item term), whose
p-value is a t test. With no item term (items that do not pair, or no per-item scores) it is exactly
Welch's unequal-variance t test on the seeds' metrics (`scipy.stats.ttest_ind(equal_var=False)`).
A resampling of seeds would be the two-level bootstrap "seeds then items"; with 3 to 5 seeds its
percentiles are too narrow (a bootstrap of S values has variance (S - 1) / S of theirs and ten
distinct resamples at S = 3), so the seed level uses the exact variance and t quantiles instead.
`tests/marin/evaluation/test_configurations.py` checks the coverage on 1,000 simulated experiments
at several ratios of seed to item noise.

Everything takes arrays with leading batch dimensions (`points` (..., S), `replicates` (..., R, S)),
so the simulation runs a thousand experiments in one call.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Spread:
    """What a configuration's seeds say about one metric: their mean, the seed term and the item noise.

    `seed_variance` is the sample variance of the seeds' metrics (NaN with one seed: unmeasured) on
    `seed_df` degrees of freedom; `item_noise` the per-seed share of `e` (sigma_e^2 / n; NaN with one
    seed); `mean_replicates` the seed mean under each resample of the items (None without per-item
    scores). Arrays with the batch shape, or floats.
    """

    seeds: int
    mean: np.ndarray
    seed_variance: np.ndarray
    seed_df: np.ndarray
    item_noise: np.ndarray
    mean_replicates: np.ndarray | None

    def borrowing(self, pooled: Spread) -> Spread:
        """This spread with the seed variance and item noise of `pooled` (one seed measures neither)."""
        return Spread(
            self.seeds,
            self.mean,
            pooled.seed_variance,
            pooled.seed_df,
            pooled.item_noise,
            self.mean_replicates,
        )


def spread(points: np.ndarray, replicates: np.ndarray | None = None) -> Spread:
    """The spread of a configuration from its seeds' metrics `points` (..., S) and their values under
    each resample of the items, `replicates` (..., R, S), or None without per-item scores."""
    points = np.asarray(points, dtype=np.float64)
    seeds = points.shape[-1]
    nan = np.full(points.shape[:-1], np.nan)
    mean = points.mean(axis=-1)
    if seeds > 1:
        variance = points.var(axis=-1, ddof=1)
    else:
        variance = nan
    mean_replicates = item_noise = None
    if replicates is not None:
        replicates = np.asarray(replicates, dtype=np.float64)
        mean_replicates = replicates.mean(axis=-1)
        if seeds > 1:
            deviations = replicates - mean_replicates[..., None]
            item_noise = deviations.var(axis=-2, ddof=1).mean(axis=-1) * seeds / (seeds - 1)
    return Spread(
        seeds,
        mean,
        variance,
        np.full(points.shape[:-1], float(seeds - 1)),
        nan if item_noise is None else item_noise,
        mean_replicates,
    )


def pooled(spreads: list[Spread]) -> Spread | None:
    """The seed variance and item noise pooled over configurations with two or more seeds (weighted by
    their degrees of freedom), for a configuration trained once; None when none has two seeds."""
    measured = [s for s in spreads if s.seeds > 1]
    if not measured:
        return None
    df = sum(s.seed_df for s in measured)
    variance = sum(s.seed_df * s.seed_variance for s in measured) / df
    noise = sum(s.seed_df * np.nan_to_num(s.item_noise) for s in measured) / df
    if all(np.all(np.isnan(s.item_noise)) for s in measured):
        noise = np.full_like(variance, np.nan)
    return Spread(0, np.nan * variance, variance, df, noise, None)


@dataclass(frozen=True)
class Estimate:
    """A configuration-level estimate: the value, its standard error and 95% interval, the degrees of
    freedom, the t test's two-sided p-value against 0, and the two variance terms it rests on."""

    value: np.ndarray
    stderr: np.ndarray
    ci95: tuple[np.ndarray, np.ndarray]
    df: np.ndarray
    p_value: np.ndarray
    seed_term: np.ndarray
    item_term: np.ndarray


def mean_estimate(config: Spread, items: int) -> Estimate:
    """A configuration's mean over its seeds, with seed and item noise (its items' difficulty included)."""
    seed_term = config.seed_variance / config.seeds
    items_term = item_term(config.mean_replicates, None, [config], paired=True)
    return _estimate(config.mean, [(seed_term, config.seed_df)], items_term, items)


def difference_estimate(a: Spread, b: Spread, items: int, paired: bool = True) -> Estimate:
    """a's mean minus b's: seed noise of each, and the item noise of the difference (on the same items,
    `paired`, what both find hard cancels; otherwise each configuration's items count apart)."""
    terms = [(a.seed_variance / a.seeds, a.seed_df), (b.seed_variance / b.seeds, b.seed_df)]
    if a.mean_replicates is None or b.mean_replicates is None:
        items_term = np.zeros_like(np.asarray(a.mean - b.mean, dtype=np.float64))
    else:
        items_term = item_term(a.mean_replicates, b.mean_replicates, [a, b], paired)
    return _estimate(a.mean - b.mean, terms, items_term, items)


def item_term(a: np.ndarray | None, b: np.ndarray | None, configs: list[Spread], paired: bool) -> np.ndarray:
    """The item-level variance of a seed mean `a` (or of the difference `a - b` of two), from their values
    under each resample of the items (..., R), less `e`'s share, which the seed term already counts;
    never below 0."""
    if a is None:
        return np.zeros(np.shape(configs[0].mean))
    if b is None:
        variance = a.var(axis=-1, ddof=1)
    elif paired:
        variance = (a - b).var(axis=-1, ddof=1)
    else:
        variance = a.var(axis=-1, ddof=1) + b.var(axis=-1, ddof=1)
    overlap = sum(np.nan_to_num(c.item_noise) / max(c.seeds, 1) for c in configs)
    return np.maximum(variance - overlap, 0.0)


def _estimate(
    value: np.ndarray, seed_terms: list[tuple[np.ndarray, np.ndarray]], item_term: np.ndarray, items: int
) -> Estimate:
    from scipy.special import stdtr, stdtrit  # Student's t; scipy.stats takes seconds to import

    value = np.asarray(value, dtype=np.float64)
    seed_term = sum(term for term, _ in seed_terms)
    variance = seed_term + item_term
    stderr = np.sqrt(variance)
    with np.errstate(divide="ignore", invalid="ignore"):
        # Welch-Satterthwaite: each term's square over its degrees of freedom
        denominator = sum(term * term / df for term, df in seed_terms) + item_term**2 / max(items - 1, 1)
        df = variance**2 / denominator
        statistic = value / stderr
    df = np.where(np.isfinite(df), df, np.nan)
    quantile = stdtrit(df, 0.5 + CONFIDENCE / 2)
    p_value = 2 * stdtr(df, -np.abs(statistic))
    interval = (value - quantile * stderr, value + quantile * stderr)
    return Estimate(value, stderr, interval, df, p_value, seed_term, item_term)


def welch(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """Welch's unequal-variance t test of two samples: (t, degrees of freedom, two-sided p)."""
    estimate = difference_estimate(spread(np.asarray(a)), spread(np.asarray(b)), items=1)
    return float(estimate.value / estimate.stderr), float(estimate.df), float(estimate.p_value)
