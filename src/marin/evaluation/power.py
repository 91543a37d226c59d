"""How many seeds (and items) a difference of a given size needs: the power of the configuration-level test.

With k seeds per configuration, the standard error of a difference between two configurations is

    se(k, n)^2 = 2 (seed^2 + noise^2 / n) / k + interaction^2 / n

where `seed` is the seed effect's standard deviation, `noise` that of which items one model happens
to get right (per item), and `interaction` how the two configurations differ item by item: the terms
`marin.evaluation.configurations` measures. The test is a t test on the Welch-Satterthwaite degrees
of freedom (2k - 2 for two configurations with equal seeds and no item term); its power against a
true difference `delta` is the noncentral t's mass beyond the critical values, which is what
statsmodels' `TTestIndPower` computes for the effect size delta / sqrt(seed^2 + noise^2 / n) when the
interaction is 0 (the tests check they agree).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

TARGET = 0.8
ALPHA = 0.05
MAX_SEEDS = 1000
MAX_ITEMS = 10_000_000


def t_test_power(noncentrality: float, df: float, alpha: float = ALPHA) -> float:
    """The power of a two-sided t test at `alpha` on `df` degrees of freedom, for a true effect of
    `noncentrality` standard errors."""
    from scipy.special import nctdtr, ndtr, stdtrit  # scipy.stats takes seconds to import

    critical = stdtrit(df, 1 - alpha / 2)
    power = float(1 - nctdtr(df, noncentrality, critical) + nctdtr(df, noncentrality, -critical))
    if math.isfinite(power):
        return power
    # far in the tail the noncentral t's CDF gives NaN; the normal limit is exact to many digits there
    return float(ndtr(noncentrality - critical) + ndtr(-critical - noncentrality))


def two_sample_power(effect_size: float, nobs: int, alpha: float = ALPHA) -> float:
    """The power of the two-sample t test with `nobs` per group, for an effect of `effect_size` standard
    deviations (statsmodels' `TTestIndPower().power(effect_size, nobs, alpha)` with ratio 1)."""
    return t_test_power(effect_size * math.sqrt(nobs / 2), 2 * nobs - 2, alpha)


@dataclass(frozen=True)
class Spreads:
    """The standard deviations a power figure rests on (see the module docstring), at `items` items."""

    seed: float
    noise: float
    interaction: float
    items: int

    def stderr(self, seeds: int, items: int | None = None) -> float:
        """The standard error of a difference between two configurations of `seeds` seeds each."""
        n = items or self.items
        return math.sqrt(2 * (self.seed**2 + self.noise**2 / n) / seeds + self.interaction**2 / n)

    def power(self, delta: float, seeds: int, items: int | None = None, alpha: float = ALPHA) -> float:
        """The chance that the test finds a true difference of `delta` with `seeds` seeds per configuration."""
        n = items or self.items
        seed_term = 2 * (self.seed**2 + self.noise**2 / n) / seeds
        item_term = self.interaction**2 / n
        df = (seed_term + item_term) ** 2 / (
            2 * (seed_term / 2) ** 2 / (seeds - 1) + item_term**2 / max(n - 1, 1)
        )
        return t_test_power(abs(delta) / self.stderr(seeds, n), df, alpha)

    def seeds_needed(self, delta: float, target: float = TARGET) -> int | None:
        """The fewest seeds per configuration that reach `target` power at these items; None when no
        number does (the items' own noise alone is too large: score more items)."""
        if self.interaction > 0 and abs(delta) / (self.interaction / math.sqrt(self.items)) < 2.8:
            return None  # the item term alone leaves less than 80% power, however many seeds
        return _smallest(lambda k: self.power(delta, k) >= target, 2, MAX_SEEDS)

    def items_needed(self, delta: float, seeds: int, target: float = TARGET) -> int | None:
        """The fewest items that reach `target` power with `seeds` seeds per configuration; None when no
        number does (the seed effect alone is too large: train more seeds)."""
        return _smallest(lambda n: self.power(delta, seeds, n) >= target, 2, MAX_ITEMS)


def _smallest(ok, lo: int, hi: int) -> int | None:
    """The smallest integer in [lo, hi] where the (monotone) `ok` holds, or None."""
    if not ok(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo
