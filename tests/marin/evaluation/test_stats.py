"""Intervals and paired differences, checked against statsmodels, lm-eval-harness and a simulation with known truth."""

from __future__ import annotations

import math

import numpy as np
import pytest

from marin.evaluation import stats
from marin.evaluation.errors import EvalDataError


def test_wilson_interval_equals_statsmodels_including_none_and_all_correct():
    from statsmodels.stats.proportion import proportion_confint

    for n in (1, 2, 7, 50, 1000):
        for successes in sorted({0, 1, n // 3, n // 2, n - 1, n}):
            lo, hi = proportion_confint(successes, n, alpha=0.05, method="wilson")
            ours = stats.wilson_interval(successes, n)
            assert ours == pytest.approx((lo, hi), abs=1e-12), (successes, n)
    assert stats.wilson_interval(0, 9)[0] == 0.0 and stats.wilson_interval(9, 9)[1] == 1.0


def test_accuracy_metric_has_the_harness_stderr_and_the_wilson_interval():
    from lm_eval.api.metrics import mean_stderr

    correct = [1, 0, 1, 1, 0, 1, 1, 0, 0, 1, 1]
    metric = stats.accuracy(correct)
    assert metric.value == pytest.approx(7 / 11) and metric.n == 11
    assert metric.stderr == pytest.approx(mean_stderr(correct), abs=1e-15)
    assert metric.ci95 == stats.wilson_interval(7, 11)
    assert metric.to_json() == {"value": 7 / 11, "stderr": metric.stderr, "ci95": list(metric.ci95), "n": 11}
    assert stats.Metric.from_json(metric.to_json()) == metric
    with pytest.raises(EvalDataError, match="0 or 1"):
        stats.accuracy([0.5, 1])


def test_bootstrap_draws_what_the_harness_bootstrap_draws(monkeypatch):
    """Our vectorised replicates of bits-per-byte and perplexity are lm-eval-harness's bootstrap_stderr's own."""
    monkeypatch.setenv("DISABLE_MULTIPROC", "1")
    from lm_eval.api.metrics import bits_per_byte, bootstrap_stderr, perplexity

    rng = np.random.default_rng(3)
    loglik = -rng.gamma(5, 20, size=137)
    num_bytes = rng.integers(40, 500, size=137)
    items = list(zip(loglik.tolist(), num_bytes.tolist(), strict=True))
    ours = stats.ratio_estimate(-loglik, num_bytes, 1 / math.log(2), iters=2000).metric()
    assert ours.value == pytest.approx(bits_per_byte(items), abs=1e-12)
    assert ours.stderr == pytest.approx(bootstrap_stderr(bits_per_byte, items, iters=2000), abs=1e-12)

    per_item = (loglik / 100).tolist()
    mean_loss = stats.mean_estimate(-np.asarray(per_item), iters=1000).map(np.exp).metric()
    assert mean_loss.value == pytest.approx(perplexity(per_item), rel=1e-12)
    assert mean_loss.stderr == pytest.approx(bootstrap_stderr(perplexity, per_item, iters=1000), rel=1e-9)


def test_95_percent_intervals_cover_the_truth_in_93_to_97_percent_of_2000_datasets():
    rng = np.random.default_rng(2024)
    datasets, n = 2000, 100

    p = rng.uniform(0.2, 0.8, size=datasets)  # accuracy: Wilson
    correct = rng.binomial(n, p)
    intervals = [stats.wilson_interval(int(k), n) for k in correct]
    covered = [lo <= q <= hi for q, (lo, hi) in zip(p, intervals, strict=True)]
    assert 0.93 <= np.mean(covered) <= 0.97

    # bits-per-byte: documents of 50-1000 bytes, each with its own nats per byte (mean 1), so bpb is a
    # ratio of sums; all datasets are resampled at once, one column pair each
    num_bytes = rng.integers(50, 1000, size=(datasets, n)).astype(float)
    nll = rng.gamma(4.0, 0.25, size=(datasets, n)) * num_bytes
    sums = stats.resampled_sums(np.concatenate([nll.T, num_bytes.T], axis=1))
    replicates = sums[:, :datasets] / sums[:, datasets:] / math.log(2)
    lo, hi = np.percentile(replicates, [2.5, 97.5], axis=0, method="inverted_cdf")
    truth = 1 / math.log(2)
    assert 0.93 <= np.mean((lo <= truth) & (truth <= hi)) <= 0.97


def test_stratified_bootstrap_keeps_strata_apart_and_stratum_zero_matches_the_plain_bootstrap():
    rng = np.random.default_rng(5)
    strata = [
        stats.Stratum(rng.gamma(3, 10, size=size), rng.integers(20, 80, size=size).astype(float))
        for size in (40, 40, 9)
    ]
    each, micro, macro = stats.pooled_and_mean(strata, scale=2.0)
    alone = stats.ratio_estimate(strata[0].numerators, strata[0].denominators, 2.0)
    assert each[0].value == alone.value and np.array_equal(each[0].replicates, alone.replicates)
    assert not np.array_equal(each[0].replicates, each[1].replicates)  # equal sizes, independent draws
    pooled = 2.0 * sum(s.numerators.sum() for s in strata) / sum(s.denominators.sum() for s in strata)
    assert micro.value == pytest.approx(pooled) and micro.n == 89
    assert macro.value == pytest.approx(np.mean([e.value for e in each]))
    lo, hi = macro.metric().ci95
    assert lo < macro.value < hi


def test_perplexity_interval_is_the_exponential_of_the_loss_interval():
    rng = np.random.default_rng(7)
    loss = stats.ratio_estimate(rng.gamma(3, 10, size=50), rng.integers(5, 30, size=50))
    ppl = loss.map(np.exp).metric()
    lo, hi = loss.metric().ci95
    assert ppl.value == pytest.approx(math.exp(loss.value))
    assert ppl.ci95 == pytest.approx((math.exp(lo), math.exp(hi)), rel=1e-12)


def test_paired_difference_of_accuracies_uses_mcnemar_exact():
    from statsmodels.stats.contingency_tables import mcnemar

    rng = np.random.default_rng(11)
    a_correct = rng.binomial(1, 0.7, size=200)
    b_correct = np.where(rng.random(200) < 0.8, a_correct, rng.binomial(1, 0.4, size=200))
    ids = [f"doc{i}" for i in range(200)]
    a = stats.ItemScores(ids, a_correct)
    b = stats.ItemScores(list(reversed(ids)), b_correct[::-1])  # same items in another order
    diff = stats.paired_difference(a, b)

    table = [
        [np.sum((a_correct == 1) & (b_correct == 1)), np.sum((a_correct == 1) & (b_correct == 0))],
        [np.sum((a_correct == 0) & (b_correct == 1)), np.sum((a_correct == 0) & (b_correct == 0))],
    ]
    assert diff.test == "mcnemar" and (diff.a_only, diff.b_only) == (table[0][1], table[1][0])
    assert diff.p_value == pytest.approx(mcnemar(table, exact=True).pvalue, rel=1e-12)
    assert diff.difference.value == pytest.approx(a_correct.mean() - b_correct.mean())
    lo, hi = diff.difference.ci95
    assert lo <= diff.difference.value <= hi and diff.difference.n == 200


def test_paired_difference_of_bits_per_byte_is_significant_only_when_the_models_differ():
    rng = np.random.default_rng(13)
    num_bytes = rng.integers(50, 500, size=80).astype(float)
    base = rng.gamma(4, 0.25, size=80) * num_bytes
    ids = list(range(80))
    a = stats.ItemScores(ids, base, num_bytes, 1 / math.log(2))
    better = stats.ItemScores(ids, base * 0.9, num_bytes, 1 / math.log(2))  # 10% less nll on every document
    noisy = stats.ItemScores(ids, base * rng.normal(1, 0.05, size=80), num_bytes, 1 / math.log(2))

    clear = stats.paired_difference(a, better)
    assert clear.test == "paired bootstrap" and clear.significant and clear.p_value < 0.01
    assert clear.difference.value > 0
    same = stats.paired_difference(a, a)
    assert same.difference.value == 0 and not same.significant and same.p_value == 1.0
    assert stats.paired_difference(a, noisy).difference.ci95[0] < 0.05


def test_paired_difference_refuses_different_items():
    a = stats.ItemScores([1, 2, 3], [1, 0, 1])
    b = stats.ItemScores([1, 2, 4], [1, 1, 1])
    with pytest.raises(EvalDataError, match="same items"):
        stats.paired_difference(a, b)


def test_centred_accuracy_mean_rescales_each_task_by_its_chance():
    rng = np.random.default_rng(17)
    four_way, two_way = rng.binomial(1, 0.55, size=60), rng.binomial(1, 0.8, size=30)
    core = stats.centred_accuracy_mean([(four_way, 0.25), (two_way, 0.5)])
    expected = ((four_way.mean() - 0.25) / 0.75 + (two_way.mean() - 0.5) / 0.5) / 2
    assert core.value == pytest.approx(expected) and core.n == 90
    assert core.ci95[0] < core.value < core.ci95[1]
