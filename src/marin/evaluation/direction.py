"""Which way is better for each metric: the one place that says so, for every "best" and every ranking.

Scores (accuracies, exact match, F1, CORE's centred accuracy) are better higher; losses,
perplexities and bits-per-byte are better lower. `higher_is_better(name)` decides from the metric's
name, as every reader of our records meets it:

- a metric name as the harness, the trainer or a results.json writes it (`acc`, `bits_per_byte`,
  `eval_loss`, `centred_accuracy`); the lm-eval-harness metrics agree with the harness's own
  `higher_is_better` registry (tests/marin/evaluation/test_direction.py checks every one);
- with a prefix the records add (`eval_`, `final_`, `best_`, `train_`) or a stderr/n suffix;
- a flat name of `marin compare` (`<task>/<metric>`, `<suite>/<metric>`, `bpb/<dataset>`), by its
  metric part (`bpb` before a dataset's name, else the last component, else the first);
- any other name by its words: one that says loss, bpb, perplexity, ppl, nll, error or entropy is
  lower-is-better, anything else higher-is-better.

A suite task's metric (`suites.Task.metric`) is one of these names, so a task's direction is its
metric's. `best(values, name)` and `ranking_value(metric, name)` are what callers rank with.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

HIGHER_IS_BETTER = frozenset(
    {
        "acc",
        "acc_norm",
        "acc_mutual_info",
        "acc_bytes",
        "acc_all",
        "accuracy",
        "exact_match",
        "em",
        "f1",
        "mcc",
        "bleu",
        "chrf",
        "chrf++",
        "likelihood",
        "bypass",
        "centred_accuracy",
        "rouge1",
        "rouge2",
        "rougeL",
    }
)
LOWER_IS_BETTER = frozenset(
    {
        "loss",
        "bpb",
        "bits_per_byte",
        "macro_bits_per_byte",
        "perplexity",
        "byte_perplexity",
        "word_perplexity",
        "token_perplexity",
        "nll",
        "ter",
        "brier_score",
        "z_loss",
    }
)
_PREFIXES = ("eval_", "final_", "best_", "train_")
_SUFFIXES = ("_stderr", "_n", "_ci95")
_PER_DATASET = ("bpb", "loss")  # marin compare's `bpb/<dataset>`
_LOWER_WORDS = frozenset({"loss", "bpb", "perplexity", "ppl", "nll", "error", "entropy", "bits"})


def _known(name: str) -> bool | None:
    """The direction of a name in the tables, also without a record's prefixes and suffixes."""
    candidates = [name]
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            candidates.append(name[: -len(suffix)])
    for candidate in list(candidates):
        stripped = candidate
        while stripped.startswith(_PREFIXES):
            stripped = stripped[next(len(p) for p in _PREFIXES if stripped.startswith(p)) :]
            candidates.append(stripped)
    for candidate in candidates:
        if candidate in HIGHER_IS_BETTER:
            return True
        if candidate in LOWER_IS_BETTER:
            return False
    return None


def higher_is_better(metric: str) -> bool:
    """Whether a larger value of the metric named `metric` is better (see the module docstring)."""
    parts = [p for p in metric.split("/") if p]
    if len(parts) > 1 and parts[0] in _PER_DATASET:
        return False  # `bpb/<dataset>`: the dataset's name says nothing
    for part in (parts[-1], parts[0]) if parts else ():
        known = _known(part)
        if known is not None:
            return known
    words = set(re.split(r"[^a-z0-9]+", (parts[-1] if parts else metric).lower()))
    return not (words & _LOWER_WORDS)


def best(values: Iterable[float], metric: str) -> float:
    """The best of `values` of `metric`: the largest where higher is better, else the smallest."""
    values = list(values)
    return max(values) if higher_is_better(metric) else min(values)


def ranking_value(metric: Any, name: str) -> float:
    """What ranks a metric of `name`, larger is better: the worse end of its 95% interval (the lower
    bound where higher is better, minus the upper bound where lower is), so a model ranks high only
    when it is good with confidence; the value without an interval. `metric` is a
    `results.MetricResult` (whose own direction decides) or its JSON `{"value", "ci95", ...}`."""
    data: Mapping[str, Any] = metric.to_json() if hasattr(metric, "to_json") else metric
    recorded = data.get("direction")
    higher = recorded == "higher" if recorded in ("higher", "lower") else higher_is_better(name)
    ci = data.get("ci95")
    value = (ci[0] if higher else ci[1]) if ci and None not in ci else data.get("value")
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return -math.inf
    return value if higher else -value
