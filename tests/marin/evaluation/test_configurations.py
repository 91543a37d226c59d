"""Configuration-level intervals against known truth, and the tests and power against statsmodels and scipy."""

from __future__ import annotations

import numpy as np
import pytest

from marin.evaluation.configurations import difference_estimate, spread, welch
from marin.evaluation.multiple_testing import Adjustment, adjust, benjamini_hochberg, holm
from marin.evaluation.power import Spreads, two_sample_power

EXPERIMENTS = 1000
SEEDS = 3
ITEMS = 100
RESAMPLES = 400
DELTA = 0.1


def _simulated_intervals(rng, seed_sd: float, interaction_sd: float, noise_sd: float):
    """1,000 experiments at once: two configurations, 3 seeds each, 100 items shared, a true difference of
    DELTA. A score is mu + seed + item difficulty + configuration x item + noise. Each experiment's items are
    resampled RESAMPLES times (the same draws serve every experiment: independent of each one's data)."""
    shape = (EXPERIMENTS, 2, SEEDS, ITEMS)
    scores = (
        np.array([DELTA, 0.0]).reshape(1, 2, 1, 1)
        + rng.normal(0, seed_sd, (EXPERIMENTS, 2, SEEDS, 1))
        + rng.normal(0, 1.0, (EXPERIMENTS, 1, 1, ITEMS))
        + rng.normal(0, interaction_sd, (EXPERIMENTS, 2, 1, ITEMS))
        + rng.normal(0, noise_sd, shape)
    )
    draws = rng.integers(0, ITEMS, (RESAMPLES, ITEMS))
    weights = np.stack([np.bincount(row, minlength=ITEMS) for row in draws]) / ITEMS  # (R, n)
    replicates = np.einsum("rn,ecsn->ecrs", weights, scores)  # each seed's mean under each resample
    a = spread(scores[:, 0].mean(-1), replicates[:, 0])
    b = spread(scores[:, 1].mean(-1), replicates[:, 1])
    estimate = difference_estimate(a, b, ITEMS)
    covered = (estimate.ci95[0] <= DELTA) & (DELTA <= estimate.ci95[1])
    item_only = np.sqrt((a.mean_replicates - b.mean_replicates).var(axis=-1, ddof=1))
    item_covered = np.abs(estimate.value - DELTA) <= 1.959964 * item_only
    return covered.mean(), item_covered.mean()


@pytest.mark.parametrize(
    ("regime", "seed_sd", "interaction_sd"),
    [("seeds dominate", 0.05, 0.1), ("seeds and items alike", 0.02, 0.2), ("items dominate", 0.0, 0.5)],
)
def test_configuration_interval_covers_the_true_difference_in_93_to_97_percent(
    regime, seed_sd, interaction_sd
):
    coverage, item_only = _simulated_intervals(
        np.random.default_rng(7), seed_sd, interaction_sd, noise_sd=0.5
    )
    assert 0.93 <= coverage <= 0.97, (regime, coverage)
    if regime == "seeds dominate":  # an interval of item noise alone claims what it cannot know
        assert item_only < 0.9, item_only


def test_welch_equals_scipys_unequal_variance_t_test():
    from scipy.stats import ttest_ind

    rng = np.random.default_rng(3)
    for a, b in [
        (rng.normal(0, 1, 3), rng.normal(1, 2, 5)),
        (rng.normal(0.5, 0.1, 4), rng.normal(0.4, 0.3, 3)),
    ]:
        t, df, p = welch(a, b)
        expected = ttest_ind(a, b, equal_var=False)
        assert t == pytest.approx(expected.statistic, rel=1e-12)
        assert p == pytest.approx(expected.pvalue, rel=1e-9)
        assert df == pytest.approx(expected.df, rel=1e-12)


def test_without_item_noise_the_configuration_test_is_welchs():
    from scipy.stats import ttest_ind

    a, b = np.array([0.61, 0.58, 0.66]), np.array([0.52, 0.55, 0.49, 0.57])
    estimate = difference_estimate(spread(a), spread(b), items=500)
    assert float(estimate.p_value) == pytest.approx(ttest_ind(a, b, equal_var=False).pvalue, rel=1e-9)


def test_holm_and_benjamini_hochberg_equal_statsmodels():
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(5)
    for p in (rng.uniform(0, 0.2, 12), np.array([0.01, 0.04, 0.03, 0.2, 0.001, 0.04]), rng.uniform(0, 1, 40)):
        assert np.allclose(holm(p), multipletests(p, method="holm")[1], rtol=0, atol=1e-12)
        assert np.allclose(benjamini_hochberg(p), multipletests(p, method="fdr_bh")[1], rtol=0, atol=1e-12)
    with_missing = adjust([0.01, float("nan"), 0.04], Adjustment.HOLM)
    assert np.isnan(with_missing[1]) and np.allclose(
        with_missing[[0, 2]], multipletests([0.01, 0.04], method="holm")[1]
    )


def test_power_equals_statsmodels_ttestindpower():
    from statsmodels.stats.power import TTestIndPower

    for effect, nobs in ((0.8, 10), (0.3, 40), (1.5, 3), (2.0, 2)):
        expected = TTestIndPower().power(effect_size=effect, nobs1=nobs, alpha=0.05, ratio=1.0)
        assert two_sample_power(effect, nobs) == pytest.approx(expected, rel=1e-9)
    # seeds needed: the smallest k whose power reaches 80%, as statsmodels' solve_power rounds up
    spreads = Spreads(seed=0.02, noise=0.3, interaction=0.0, items=400)
    per_seed_sd = np.sqrt(0.02**2 + 0.3**2 / 400)
    k = TTestIndPower().solve_power(effect_size=0.03 / per_seed_sd, power=0.8, alpha=0.05, ratio=1.0)
    assert spreads.seeds_needed(0.03) == int(np.ceil(k))
    assert spreads.power(0.03, 5) == pytest.approx(
        TTestIndPower().power(effect_size=0.03 / per_seed_sd, nobs1=5, alpha=0.05), rel=1e-9
    )


def test_power_says_when_more_seeds_or_more_items_cannot_help():
    items_bound = Spreads(seed=0.0, noise=0.3, interaction=0.5, items=50)  # the items' own noise dominates
    assert items_bound.seeds_needed(0.05) is None and items_bound.items_needed(0.05, 3) is not None
    seeds_bound = Spreads(seed=0.05, noise=0.3, interaction=0.0, items=1000)  # the seed effect dominates
    assert seeds_bound.items_needed(0.03, 3) is None and seeds_bound.seeds_needed(0.03) is not None
