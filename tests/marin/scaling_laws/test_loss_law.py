"""Approach 3 (`fit_loss_law`): recovery, interval coverage, determinism, agreement with scipy, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from marin.scaling_laws import ScalingLawError, fit_loss_law, fit_loss_laws
from marin.scaling_laws.loss_law import PARAMETERS
from tests.marin.scaling_laws.synthetic import A_EXPONENT, B_EXPONENT, LAW, isoflop_design, law_loss, noisy

TRUTH = {**LAW, "a": A_EXPONENT, "b": B_EXPONENT}


def test_a_noise_free_law_is_recovered_to_many_digits():
    _, params, tokens = isoflop_design()
    fit = fit_loss_law(params, tokens, law_loss(params, tokens))
    for name in PARAMETERS:
        assert getattr(fit, name) == pytest.approx(LAW[name], rel=1e-5), name
    assert np.abs(fit.residuals).max() < 1e-8


def test_the_95_percent_interval_of_every_parameter_covers_the_truth_in_at_least_90_percent_of_200_seeds():
    _, params, tokens = isoflop_design(budgets=4, sizes=5)
    clean = law_loss(params, tokens)
    datasets = [(params, tokens, noisy(clean, seed)) for seed in range(200)]
    fits = fit_loss_laws(datasets, bootstrap=50, seed=7)
    coverage = {
        name: np.mean([f.intervals[name][0] <= truth <= f.intervals[name][1] for f in fits])
        for name, truth in TRUTH.items()
    }
    assert all(rate >= 0.90 for rate in coverage.values()), coverage
    # the intervals say something: alpha's is narrower than its distance from 0 in most fits
    widths = np.array([f.intervals["alpha"][1] - f.intervals["alpha"][0] for f in fits])
    assert np.median(widths) < LAW["alpha"]


def test_the_fit_is_deterministic_for_a_seed_and_does_not_depend_on_the_order_of_the_runs():
    _, params, tokens = isoflop_design(budgets=3, sizes=4)
    loss = noisy(law_loss(params, tokens), seed=3)
    first = fit_loss_law(params, tokens, loss, bootstrap=50, seed=11)
    again = fit_loss_law(params, tokens, loss, bootstrap=50, seed=11)
    shuffled = np.random.default_rng(0).permutation(params.size)
    reordered = fit_loss_law(params[shuffled], tokens[shuffled], loss[shuffled], bootstrap=50, seed=11)
    for other in (again, reordered):
        assert [getattr(other, n) for n in PARAMETERS] == [getattr(first, n) for n in PARAMETERS]
        assert other.intervals == first.intervals
    np.testing.assert_array_equal(reordered.residuals, first.residuals[shuffled])  # given order
    other_seed = fit_loss_law(params, tokens, loss, bootstrap=50, seed=12)
    assert other_seed.intervals != first.intervals and other_seed.alpha == first.alpha


def test_fitting_several_datasets_at_once_gives_each_its_own_fit():
    _, params, tokens = isoflop_design(budgets=3, sizes=4)
    clean = law_loss(params, tokens)
    datasets = [(params, tokens, noisy(clean, 1)), (params[:9], tokens[:9], noisy(clean[:9], 2))]
    together = fit_loss_laws(datasets, bootstrap=30, seed=5)
    for dataset, fit in zip(datasets, together, strict=True):
        alone = fit_loss_law(*dataset, bootstrap=30, seed=5)
        for name in PARAMETERS:
            assert getattr(fit, name) == pytest.approx(getattr(alone, name), rel=1e-9)
        for name, (lo, hi) in alone.intervals.items():
            assert fit.intervals[name] == pytest.approx((lo, hi), rel=1e-6)


def test_the_batched_lbfgs_reaches_the_optimum_scipy_finds_from_the_same_starts():
    from scipy.optimize import minimize

    _, params, tokens = isoflop_design(budgets=3, sizes=5)
    loss = noisy(law_loss(params, tokens), seed=4, sigma=0.02)
    fit = fit_loss_law(params, tokens, loss)
    x, y, z = np.log(params), np.log(tokens), np.log(loss)
    delta, scale = 1e-3, 1e6

    def objective(theta, gradient=True):
        e, a, b, alpha, beta = theta
        t1, t2 = a - alpha * x, b - beta * y
        top = np.maximum(np.maximum(t1, t2), e)
        s1, s2, s3 = np.exp(t1 - top), np.exp(t2 - top), np.exp(e - top)
        r = top + np.log(s1 + s2 + s3) - z
        value = scale * np.sum(np.where(np.abs(r) <= delta, 0.5 * r * r, delta * (np.abs(r) - 0.5 * delta)))
        if not gradient:
            return value
        g = scale * np.clip(r, -delta, delta) / (s1 + s2 + s3)
        return value, np.array([g @ s3, g @ s1, g @ s2, -(g * s1) @ x, -(g * s2) @ y])

    # scipy from the same grid (the papers' 4,500 initial values), L-BFGS-B from its 8 best points
    axes = (np.arange(-1, 1.01, 0.5), np.arange(0, 25.01, 5), np.arange(0, 25.01, 5))
    axes += (np.arange(0, 2.01, 0.5), np.arange(0, 2.01, 0.5))
    grid = np.stack([g.ravel() for g in np.meshgrid(*axes, indexing="ij")], axis=1)
    starts = grid[np.argsort([objective(g, gradient=False) for g in grid], kind="stable")[:8]]
    options = {"maxiter": 5000, "ftol": 1e-15, "gtol": 1e-10}
    found = min(
        (minimize(objective, s, jac=True, method="L-BFGS-B", options=options) for s in starts),
        key=lambda r: r.fun,
    )
    assert fit.objective <= found.fun * (1 + 1e-9)
    e, a, b, alpha, beta = found.x
    assert [fit.E, fit.alpha, fit.beta] == pytest.approx([math.exp(e), alpha, beta], rel=1e-4)
    scipy_law = LAW | {"E": math.exp(e), "A": math.exp(a), "B": math.exp(b), "alpha": alpha, "beta": beta}
    theirs = scipy_law["E"] + scipy_law["A"] * params**-alpha + scipy_law["B"] * tokens**-beta
    np.testing.assert_allclose(fit.predict(params, tokens), theirs, rtol=1e-6)


def test_the_optimal_split_is_chinchillas_closed_form_and_the_same_numerically():
    _, params, tokens = isoflop_design()
    fit = fit_loss_law(params, tokens, law_loss(params, tokens))
    flops = 1e22
    n, d = fit.optimal(flops)
    assert 6 * n * d == pytest.approx(flops)
    g = (fit.alpha * fit.A / (fit.beta * fit.B)) ** (1 / (fit.alpha + fit.beta))
    assert n == pytest.approx(g * (flops / 6) ** fit.a)
    numeric_n, numeric_d = fit.optimal(flops, flops_per_token=lambda p: 6 * p)
    assert numeric_n == pytest.approx(n, rel=1e-4) and numeric_d == pytest.approx(d, rel=1e-4)
    # no split of the same budget does better
    for factor in (0.8, 1.25):
        assert fit.predict(n * factor, d / factor) > fit.predict(n, d)


@pytest.mark.parametrize(
    ("params", "tokens", "loss", "message"),
    [
        (
            [1e6, 2e6, 4e6, 8e6],
            [1e9] * 4,
            [3.0, 2.9, 2.8, 2.7],
            "fit_loss_law: 4 runs; the law has 5 parameters",
        ),
        ([1e6, 0, 4e6, 8e6, 1e7], [1e9] * 5, [3.0] * 5, "fit_loss_law: params[1] = 0.0; every N, D and loss"),
        ([1e6] * 5, [1e9, 1e9, -1, 1e9, 1e9], [3.0] * 5, "fit_loss_law: tokens[2] = -1.0"),
        ([1e6] * 5, [1e9] * 5, [3.0, 3.0, 3.0, 3.0, float("nan")], "fit_loss_law: loss[4] = nan"),
        (
            [1e6] * 5,
            [1e9] * 4,
            [3.0] * 5,
            "fit_loss_law: the inputs differ in length (params has 5, tokens has 4",
        ),
    ],
)
def test_bad_input_is_one_line_naming_the_value(params, tokens, loss, message):
    with pytest.raises(ScalingLawError) as caught:
        fit_loss_law(params, tokens, loss)
    text = str(caught.value)
    assert text.startswith(message) and "\n" not in text
