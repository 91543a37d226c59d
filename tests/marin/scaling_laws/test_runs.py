"""Reading a run's metric: both forms a metric takes, and what a fit needs of the value."""

from __future__ import annotations

import math

import pytest

from marin.scaling_laws import ScalingLawError
from marin.scaling_laws.runs import MetricReading, ScalingRun, checked_reading, metric_value, record_value


def test_an_evaluation_metric_is_read_from_its_object_with_its_stderr():
    assert metric_value({"value": 0.9, "stderr": 0.01, "ci95": [0.88, 0.92], "n": 50}) == (0.9, 0.01)
    assert metric_value({"value": 0.9, "stderr": None, "ci95": None, "n": 1}) == (0.9, None)
    value, stderr = metric_value({"value": None, "stderr": None, "ci95": None, "n": 0})
    assert math.isnan(value) and stderr is None
    for not_a_metric in (1.25, 3, True, "0.9", None, {"value": 0.9}, {"mean": 0.9, "n": 3}, [0.9]):
        assert metric_value(not_a_metric) is None


def test_a_train_metric_is_a_number_of_a_record_with_its_stderr_beside_it_when_the_record_has_one():
    record = {"step": 10, "eval_bpb": 1.5, "story/acc": 0.4, "story/acc_stderr": 0.05, "flag": True}
    assert record_value(record, "eval_bpb") == (1.5, None)
    assert record_value(record, "story/acc") == (0.4, 0.05)
    assert record_value(record, "flag") is None and record_value(record, "missing") is None


def test_a_fit_takes_only_a_positive_finite_value_and_names_the_run_that_has_another():
    run = ScalingRun(
        train_step="runs/a", budget=1e12, params=10, tokens=10, flops=1e12, evaluation_step="runs/a-eval"
    )
    assert checked_reading(run, "bpb", MetricReading(0.5, None, "x")) == 0.5
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(
            ScalingLawError, match=r"^run 'runs/a-eval': bpb = .* \(x\); a scaling law fits a positive"
        ):
            checked_reading(run, "bpb", MetricReading(bad, None, "x"))
