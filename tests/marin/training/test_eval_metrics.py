"""The training-time evaluation's stderr is the ratio estimator's: statsmodels' weighted mean with
heteroskedasticity-robust (HC1) errors, which for equal weights is the units' standard error."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats
import statsmodels.api as sm
import torch

from marin.training.eval_metrics import RatioSums, eval_metrics


def test_the_stderr_of_a_weighted_mean_is_statsmodels_hc1_weighted_least_squares():
    rng = np.random.default_rng(0)
    weights = rng.integers(5, 60, size=40).astype(float)  # target tokens per window
    means = rng.normal(3.0, 0.4, size=40)  # each window's mean loss
    sums = RatioSums()
    sums.add(torch.tensor(means[:25] * weights[:25]), torch.tensor(weights[:25]))  # in two batches
    sums.add(torch.tensor(means[25:] * weights[25:]), torch.tensor(weights[25:]))
    fit = sm.WLS(means, np.ones_like(means), weights=weights).fit(cov_type="HC1")
    assert sums.mean() == pytest.approx(fit.params[0], rel=1e-12)
    assert sums.stderr() == pytest.approx(fit.bse[0], rel=1e-9)

    equal = RatioSums()
    equal.add(torch.tensor(means * 32), torch.full((40,), 32.0))
    assert equal.stderr() == pytest.approx(scipy.stats.sem(means), rel=1e-9)


def test_sums_add_up_across_processes_and_name_each_figure():
    a, b = RatioSums(), RatioSums()
    a.add(torch.tensor([2.0, 4.0]), torch.tensor([1.0, 2.0]))
    b.add(torch.tensor([3.0]), torch.tensor([1.0]))
    whole = RatioSums.of([x + y for x, y in zip(a.as_list(), b.as_list(), strict=True)])
    alone = RatioSums()
    alone.add(torch.tensor([2.0, 4.0, 3.0]), torch.tensor([1.0, 2.0, 1.0]))
    assert whole == alone
    assert eval_metrics({"loss": whole, "bpb": RatioSums()}) == {
        "eval_loss": 9.0 / 4.0,
        "eval_loss_stderr": alone.stderr(),
        "eval_loss_n": 3,
    }
