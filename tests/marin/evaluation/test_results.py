"""The typed result schema: every kind of metric flows through `flat_metrics`, with its direction and aggregation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from marin.evaluation import stats
from marin.evaluation.errors import EvalDataError
from marin.evaluation.results import (
    Aggregation,
    Direction,
    DocumentItems,
    EvaluationItems,
    EvaluationResults,
    ExactMatchResult,
    ItemRecord,
    MetricResult,
    Perplexity,
    SuiteResult,
    decode_results,
)


def _perplexity() -> Perplexity:
    from marin.evaluation.perplexity import DocumentScore, summarize

    scores = [DocumentScore("stories", "stories", 10.0 + i, 5 + i, 20 + i) for i in range(6)]
    return Perplexity.of(summarize(scores, iters=50))


def _results() -> EvaluationResults:
    acc = MetricResult.named(stats.accuracy([1, 0, 1, 1]), "acc", Aggregation.MEAN)
    return EvaluationResults(
        perplexity=_perplexity(),
        harness={"marin_story_endings": {"acc": acc}},
        suite=SuiteResult(name="core", aggregate="centred_accuracy", tasks=["copa"], centred_accuracy=acc),
        exact_match=ExactMatchResult(
            task="tinystories_qa",
            exact_match=MetricResult.named(stats.accuracy([1, 0]), "exact_match", Aggregation.MEAN),
            by_kind={"who": MetricResult.named(stats.accuracy([1]), "exact_match", Aggregation.MEAN)},
        ),
    )


def test_flat_metrics_name_every_kind_of_metric_with_its_direction_and_aggregation():
    flat = _results().flat_metrics()
    assert list(flat) == [
        "core/centred_accuracy",
        "bpb",
        "loss",
        "bpb/stories",
        "loss/stories",
        "marin_story_endings/acc",
        "tinystories_qa/exact_match",
        "tinystories_qa/who/exact_match",
    ]
    assert flat["bpb"].direction == Direction.LOWER and flat["bpb"].aggregation == Aggregation.RATIO
    assert flat["tinystories_qa/exact_match"].direction == Direction.HIGHER
    assert flat["tinystories_qa/exact_match"].value == 0.5 and flat["tinystories_qa/exact_match"].n == 2
    macro = _results().perplexity.macro.datasets
    assert macro.bpb.aggregation == Aggregation.MACRO and macro.perplexity.direction == Direction.LOWER


def test_results_round_trip_through_json_and_a_metric_keeps_the_plain_metric_shape():
    results = _results()
    again = decode_results(results.to_bytes())
    assert again == results
    as_json = again.flat_metrics()["bpb"].to_json()
    assert stats.is_metric(as_json) and as_json["direction"] == "lower" and as_json["aggregation"] == "ratio"
    assert stats.Metric.from_json(as_json) == results.perplexity.micro.bpb.stats_metric()


def test_a_file_that_is_not_an_evaluations_results_is_one_error_naming_it():
    with pytest.raises(EvalDataError, match=r"^x/results.json: not an evaluation's results"):
        decode_results(b'{"harness": {"t": {"acc": {"value": 1}}}}', "x/results.json")


def test_items_give_paired_scores_by_the_flat_names_exact_match_included():
    items = EvaluationItems(
        perplexity={
            "stories": DocumentItems(ids=["0:a", "1:b"], nll=[2.0, 4.0], tokens=[2, 2], bytes=[4, 4])
        },
        harness={
            "marin_story_endings": {"acc": ItemRecord(ids=["0:x", "1:y"], values=[1.0, 0.0])},
            "marin_text_perplexity": {
                "word_perplexity": ItemRecord(ids=["0:x"], values=[1.0], transform="weighted_perplexity")
            },
        },
        exact_match={"tinystories_qa": ItemRecord(ids=["0:q", "1:r"], values=[1.0, 1.0])},
    )
    scores = items.scores()
    assert set(scores) == {
        "bpb",
        "loss",
        "bpb/stories",
        "loss/stories",
        "marin_story_endings/acc",
        "tinystories_qa/exact_match",
    }
    bpb = scores["bpb/stories"]
    num, den = bpb.aligned(bpb.ids)
    assert math.isclose(bpb.scale * num.sum() / den.sum(), 6 / 8 / math.log(2))
    assert np.array_equal(scores["tinystories_qa/exact_match"].values, [1.0, 1.0])


def test_a_checkpoints_results_are_one_point_of_every_curve_exact_match_included():
    points = _results().curve_points(step=20, tokens=2560)
    assert set(points) == set(_results().flat_metrics())
    em = points["tinystories_qa/exact_match"]
    assert (em.step, em.tokens, em.value, em.direction) == (20, 2560, 0.5, Direction.HIGHER)


def test_the_curves_reader_gives_an_exact_match_curve_with_its_intervals(tmp_path):
    from marin.evaluation.results import CheckpointPoint, Checkpoints
    from marin.evaluation.sweep_report import read_eval_curve

    curves: dict[str, list] = {}
    for step, correct in ((10, [0, 0, 1, 0]), (20, [1, 0, 1, 1])):
        exact = MetricResult.named(stats.accuracy(correct), "exact_match", Aggregation.MEAN)
        checkpoint = EvaluationResults(exact_match=ExactMatchResult(task="tinystories_qa", exact_match=exact))
        for name, point in checkpoint.curve_points(step, step * 128).items():  # as the evaluation step writes
            curves.setdefault(name, []).append(point)
    written = EvaluationResults(
        checkpoints=Checkpoints(
            steps=[10, 20],
            points=[
                CheckpointPoint(step=s, tokens=s * 128, results=f"checkpoints/step-{s}") for s in (10, 20)
            ],
            curves=curves,
        )
    )
    (tmp_path / "results.json").write_bytes(written.to_bytes())
    curve = read_eval_curve("eval/run", str(tmp_path), ("tinystories_qa/exact_match",), "tokens")
    assert [(p["tokens"], p["tinystories_qa/exact_match"]) for p in curve] == [(1280, 0.25), (2560, 0.75)]
    lo, hi = curve[1]["tinystories_qa/exact_match_ci95"]
    assert (lo, hi) == pytest.approx(stats.accuracy([1, 0, 1, 1]).ci95) and lo < 0.75 < hi
