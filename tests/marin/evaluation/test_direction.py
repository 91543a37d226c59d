"""Which way is better: one table for every "best" and every ranking (sweep_report, marin compare, the UI)."""

from __future__ import annotations

import pytest

from marin.evaluation.compare import ranked
from marin.evaluation.comparison import Evaluated
from marin.evaluation.direction import HIGHER_IS_BETTER, LOWER_IS_BETTER, best, higher_is_better
from marin.evaluation.sweep_report import SweepReportConfig, summary_rows


def test_our_table_agrees_with_the_harness_registry_on_every_metric_it_registers():
    import lm_eval.api.metrics  # noqa: F401  (registers the metrics)
    from lm_eval.api.registry import HIGHER_IS_BETTER_REGISTRY

    registered = {name: HIGHER_IS_BETTER_REGISTRY.get(name) for name in HIGHER_IS_BETTER_REGISTRY.keys()}
    assert registered  # the harness registers its metrics on import
    for name, higher in registered.items():
        assert higher_is_better(name) == higher, name
    assert not HIGHER_IS_BETTER & LOWER_IS_BETTER


@pytest.mark.parametrize(
    "name, higher",
    [
        ("acc", True),
        ("marin_story_endings/acc_norm", True),
        ("core/centred_accuracy", True),
        ("marin_next_word/exact_match_stderr", True),
        ("eval_loss", False),
        ("final_eval_bpb", False),
        ("best_eval_loss", False),
        ("bpb", False),
        ("bpb/tokenized/tinystories", False),  # a dataset's name says nothing
        ("loss/paloma/c4_en", False),
        ("marin_text_perplexity/bits_per_byte", False),
        ("wikitext/word_perplexity", False),
        ("val/ppl", False),  # unknown names by their words
        ("reward", True),
    ],
)
def test_direction_of_the_names_our_records_carry(name, higher):
    assert higher_is_better(name) is higher


def test_best_and_the_sweep_reports_best_and_headline_follow_the_direction():
    assert best([0.3, 0.5, 0.4], "acc") == 0.5 and best([2.0, 1.5, 1.7], "eval_loss") == 1.5
    config = SweepReportConfig(runs=(("a", "train/a"), ("b", "train/b")), metrics=("acc", "eval_loss"))
    curves = {
        "a": [{"tokens": 1, "acc": 0.3, "eval_loss": 2.0}, {"tokens": 2, "acc": 0.5, "eval_loss": 1.8}],
        "b": [{"tokens": 1, "acc": 0.6, "eval_loss": 1.5}, {"tokens": 2, "acc": 0.4, "eval_loss": 1.6}],
    }
    a, b = summary_rows(config, curves)
    assert (a["best_acc"], a["best_eval_loss"]) == (0.5, 1.8)
    assert (b["best_acc"], b["best_eval_loss"]) == (0.6, 1.5)


def test_ranking_is_by_the_worse_end_of_the_interval_in_the_metrics_direction():
    def ev(label: str, value: float, lo: float, hi: float) -> Evaluated:
        metric = {"value": value, "ci95": [lo, hi], "n": 10}
        return Evaluated(label, label, {}, {"acc": metric, "bpb": metric})

    # wide: the better value but the worse end further out, either way
    wide, narrow, missing = (
        ev("wide", 1.0, 0.5, 1.5),
        ev("narrow", 0.9, 0.8, 1.0),
        Evaluated("x", "x", {}, {}),
    )
    assert [e.label for e in ranked([wide, narrow, missing], "acc")] == [
        "narrow",
        "wide",
    ]  # lower bound 0.8 > 0.5
    assert [e.label for e in ranked([wide, narrow], "bpb")] == ["narrow", "wide"]  # upper bound 1.0 < 1.5
    low, high = ev("low", 0.5, 0.45, 0.55), ev("high", 0.9, 0.85, 0.95)
    assert [e.label for e in ranked([low, high], "acc")] == ["high", "low"]
    assert [e.label for e in ranked([low, high], "bpb")] == ["low", "high"]
