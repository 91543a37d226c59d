"""Mixture schedules: per-batch counts fixed by the weights (largest remainder), phases by step, one-line errors."""

from collections import Counter

import pytest
import torch

from marin.data.token_cache import TokenCache
from marin.training.errors import TrainingConfigError
from marin.training.loader import NamedSource, Prefetcher, WindowMixture
from marin.training.mixture import MixtureSchedule, largest_remainder


def test_largest_remainder_gives_floors_then_the_largest_fractions_ties_to_the_first():
    assert largest_remainder([1, 1, 1], 64) == (22, 21, 21)
    assert largest_remainder([3, 1], 8) == (6, 2)
    assert largest_remainder([1, 2], 8) == (3, 5)  # quotas 2.67 / 5.33: the one row left goes to 0.67
    assert largest_remainder([0.1, 0.2, 0.7], 10) == (1, 2, 7)  # exact: no float rounding decides
    assert largest_remainder([0.0, 5.0], 3) == (0, 3)
    for weights in ([0.3, 0.3, 0.4], [1e-9, 1.0], [7, 11, 13, 17]):
        assert sum(largest_remainder(weights, 37)) == 37


def test_a_schedule_switches_phase_at_its_steps():
    schedule = MixtureSchedule.of(["a", "b"], [(0, {"a": 1.0}), (800, {"a": 0.5, "b": 0.5})])
    assert schedule.counts(0, 64) == schedule.counts(799, 64) == (64, 0)
    assert schedule.counts(800, 64) == schedule.counts(10_000, 64) == (32, 32)
    assert MixtureSchedule.of(["a", "b"], {"a": 3, "b": 1}).counts(5, 64) == (48, 16)


def test_bad_mixtures_are_one_error_each_naming_what_is_wrong():
    names = ["a", "b"]
    with pytest.raises(TrainingConfigError, match=r"datasets\[1\] \(step 5\): the weights sum to 0.0"):
        MixtureSchedule.of(names, [(0, {"a": 1.0}), (5, {"a": 0.0, "b": 0.0})])
    with pytest.raises(TrainingConfigError, match="phase steps must increase, but phase 2 starts at step 5"):
        MixtureSchedule.of(names, [(0, {"a": 1.0}), (5, {"b": 1.0}), (5, {"a": 1.0})])
    with pytest.raises(TrainingConfigError, match="names dataset 'c', which the run does not declare"):
        MixtureSchedule.of(names, [(0, {"a": 1.0}), (5, {"c": 1.0})])
    with pytest.raises(TrainingConfigError, match="the first phase must start at step 0"):
        MixtureSchedule.of(names, [(3, {"a": 1.0})])
    with pytest.raises(TrainingConfigError, match="weights must be ≥ 0"):
        MixtureSchedule.of(names, [(0, {"a": 1.0, "b": -1.0})])


def test_every_batch_takes_the_largest_remainder_split_of_its_phase(story_cache, other_cache):
    sources = [
        NamedSource("stories", TokenCache.open(story_cache).split("train")),
        NamedSource("other", TokenCache.open(other_cache).split("train")),
    ]
    schedule = MixtureSchedule.of(
        ["stories", "other"], [(0, {"stories": 1.0}), (3, {"stories": 1.0, "other": 2.0})]
    )
    loader = WindowMixture(sources, seq_len=32, batch_size=8, seed=0, schedule=schedule)
    orders = []
    for step in range(6):
        plan = loader.plan_batch()
        counts = Counter(src for src, _ in plan.rows)
        assert (
            (counts[0], counts[1])
            == largest_remainder(schedule.phase_at(step).weights, 8)
            == schedule.counts(step, 8)
        )
        orders.append([src for src, _ in plan.rows])
    assert orders[3] != orders[4] or orders[4] != orders[5]  # the order within a batch is shuffled
    fresh = WindowMixture(sources, seq_len=32, batch_size=8, seed=0, schedule=schedule)
    prefetcher = Prefetcher(fresh, torch.device("cpu"))
    try:
        tokens = [prefetcher.next().domain_tokens for _ in range(5)]
    finally:
        prefetcher.close()
    assert tokens[2] == {"stories": 3 * 8 * 32, "other": 0}
    assert tokens[4] == {"stories": (3 * 8 + 2 * 3) * 32, "other": 2 * 5 * 32}
