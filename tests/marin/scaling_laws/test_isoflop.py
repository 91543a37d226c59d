"""Approach 2 (`fit_isoflop`): the minima and exponents of a known law, interval coverage, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from marin.scaling_laws import ScalingLawError, fit_isoflop
from tests.marin.scaling_laws.synthetic import (
    A_EXPONENT,
    B_EXPONENT,
    isoflop_design,
    law_loss,
    noisy,
    optimum,
)


def test_the_minima_and_exponents_of_a_noise_free_law_are_found():
    budgets, params, tokens = isoflop_design(budgets=4, sizes=5, span=0.5)
    fit = fit_isoflop(budgets, params, law_loss(params, tokens), tokens=tokens)
    # the true isoflop curve is nearly a parabola in log N this close to its minimum (alpha ≈ beta):
    # the vertex is off by under 1%, and by the same factor at every budget, so the slopes are right
    for o in fit.optima:
        assert o.params == pytest.approx(optimum(o.budget), rel=1e-2) and o.inside and o.runs == 5
        assert o.tokens == pytest.approx(o.budget / (6 * o.params), rel=1e-9)
    assert fit.a == pytest.approx(A_EXPONENT, abs=1e-3) and fit.b == pytest.approx(B_EXPONENT, abs=1e-3)
    n, d = fit.optimal(1e23)
    assert 6 * n * d == pytest.approx(1e23, rel=1e-3)


def test_without_tokens_the_token_exponent_is_one_minus_the_parameter_exponent():
    budgets, params, tokens = isoflop_design(budgets=3, sizes=4)
    loss = noisy(law_loss(params, tokens), seed=1)
    fit = fit_isoflop(budgets, params, loss)
    assert fit.b == pytest.approx(1 - fit.a) and not fit.tokens_from_runs
    lo, hi = fit.intervals["a"]
    assert fit.intervals["b"] == pytest.approx((1 - hi, 1 - lo))


def test_the_95_percent_intervals_of_both_exponents_cover_the_truth_in_at_least_90_percent_of_200_seeds():
    budgets, params, tokens = isoflop_design(budgets=4, sizes=5)
    clean = law_loss(params, tokens)
    hits = {"a": 0, "b": 0}
    for seed in range(200):
        fit = fit_isoflop(budgets, params, noisy(clean, seed), tokens=tokens)
        for name, truth in (("a", A_EXPONENT), ("b", B_EXPONENT)):
            lo, hi = fit.intervals[name]
            hits[name] += lo <= truth <= hi
    assert hits["a"] >= 180 and hits["b"] >= 180, hits


def test_the_fit_does_not_depend_on_the_order_of_the_runs():
    budgets, params, tokens = isoflop_design(budgets=3, sizes=4)
    loss = noisy(law_loss(params, tokens), seed=2)
    order = np.random.default_rng(0).permutation(params.size)
    first = fit_isoflop(budgets, params, loss, tokens=tokens)
    again = fit_isoflop(budgets[order], params[order], loss[order], tokens=tokens[order])
    assert again.to_json() == first.to_json()


def test_two_budgets_give_exponents_without_intervals():
    budgets, params, tokens = isoflop_design(budgets=2, sizes=3)
    fit = fit_isoflop(budgets, params, law_loss(params, tokens))
    assert (
        fit.intervals == {} and fit.params_law.interval is None and fit.params_law.interval_at(1e22) is None
    )


@pytest.mark.parametrize(
    ("budgets", "params", "message"),
    [
        (
            [1e18, 1e19, 1e20, 1e21, 1e22],
            [1e8, 2e8, 3e8, 4e8, 5e8],
            "fit_isoflop: Approach 2 fits a parabola per budget and needs at least 3 model sizes at each budget, "
            "but each of the 5 budgets has a single size",
        ),
        (
            [1e18] * 3 + [1e19] * 2,
            [1e8, 2e8, 4e8, 1e8, 2e8],
            "fit_isoflop: Approach 2 fits a parabola per budget and needs at least 3 model sizes at each budget, "
            "but budget 1e+19 has 2",
        ),
        (
            [1e18] * 3,
            [1e8, 2e8, 4e8],
            "fit_isoflop: 1 budget; a power law through the optima needs at least 2",
        ),
        ([1e18, 1e18, -1.0], [1e8, 2e8, 4e8], "fit_isoflop: budgets[2] = -1.0; every N, D and loss"),
    ],
)
def test_bad_designs_are_one_line(budgets, params, message):
    with pytest.raises(ScalingLawError) as caught:
        fit_isoflop(budgets, params, [3.0] * len(params))
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_a_budget_whose_loss_is_not_convex_in_log_n_says_its_sizes_miss_the_optimum():
    budgets = [1e18] * 3 + [1e19] * 3
    params = [1e8, 2e8, 4e8] * 2
    loss = [3.0, 2.9, 2.7, 3.0, 2.8, 2.9]  # the first budget still falls at its largest size
    with pytest.raises(
        ScalingLawError, match=r"at budget 1e\+18 the loss is not convex in log N .* add smaller"
    ):
        fit_isoflop(budgets, params, loss)


def test_the_parabolas_lines_and_intervals_are_statsmodels_ols():
    import statsmodels.api as sm

    budgets, params, tokens = isoflop_design(budgets=4, sizes=5)
    loss = noisy(law_loss(params, tokens), seed=5, sigma=0.02)
    fit = fit_isoflop(budgets, params, loss, tokens=tokens)
    for o in fit.optima:
        at = budgets == o.budget
        log_n = np.log(params[at])
        quadratic = sm.OLS(loss[at], np.column_stack([np.ones(at.sum()), log_n, log_n**2])).fit()
        c0, c1, c2 = quadratic.params
        assert o.coefficients == pytest.approx((c2, c1, c0), rel=1e-9)
        assert o.params == pytest.approx(np.exp(-c1 / (2 * c2)), rel=1e-9)
    log_c = np.log([o.budget for o in fit.optima])
    design = sm.add_constant(log_c)
    for law, optimum_of in ((fit.params_law, "params"), (fit.tokens_law, "tokens")):
        line = sm.OLS(np.log([getattr(o, optimum_of) for o in fit.optima]), design).fit()
        assert law.exponent == pytest.approx(line.params[1], rel=1e-9)
        assert law.interval == pytest.approx(tuple(line.conf_int(alpha=0.05)[1]), rel=1e-9)
        target = 1e23
        mean = line.get_prediction(np.array([[1.0, np.log(target)]])).conf_int(alpha=0.05)[0]
        assert law.interval_at(target) == pytest.approx(tuple(np.exp(mean)), rel=1e-9)
