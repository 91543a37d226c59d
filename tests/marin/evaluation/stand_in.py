"""Stand-in train and evaluation steps: real steps with real key records, whose evaluations write the
result schema from per-item scores the test chooses, so comparisons can be checked against known truth
without training."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec


def _train(output_path: str) -> dict:
    return {"headline": {"metric": "loss", "value": 1.0}}


@dataclass(frozen=True)
class Extras:
    """What a stand-in evaluation also records: exact match per item, and the model's effective config."""

    exact_match: tuple[float, ...] = ()
    config: tuple[tuple[str, Any], ...] = ()  # the ModelRecord's config, as items


def _evaluate(accuracy: Sequence[float], nll: Sequence[float], extras: Extras, output_path: str) -> dict:
    from marin.evaluation import stats
    from marin.evaluation.perplexity import DocumentScore, summarize
    from marin.evaluation.results import (
        Aggregation,
        DocumentItems,
        EvaluationItems,
        EvaluationResults,
        ExactMatchResult,
        ItemRecord,
        MetricResult,
        ModelRecord,
        Perplexity,
        TaskSettings,
    )

    ids = [f"{i}:item" for i in range(len(accuracy))]
    docs = [f"{i}:doc" for i in range(len(nll))]
    acc = MetricResult.named(stats.accuracy(accuracy), "acc", Aggregation.MEAN)
    scores = [DocumentScore("stories", "stories", float(x), 10, 40) for x in nll]
    exact = None
    if extras.exact_match:
        exact = ExactMatchResult(
            task="tinystories_qa",
            exact_match=MetricResult.named(
                stats.accuracy(extras.exact_match), "exact_match", Aggregation.MEAN
            ),
        )
    results = EvaluationResults(
        model=ModelRecord(kind="step", location="model", label="model", config=dict(extras.config) or None),
        exact_match=exact,
        perplexity=Perplexity.of(summarize(scores, iters=200)),
        harness={"story_endings": {"acc": acc}},
        tasks={
            "story_endings": TaskSettings(harness_task="story_endings", metric="acc", chance=0.25, n=len(ids))
        },
    )
    items = EvaluationItems(
        perplexity={
            "stories": DocumentItems(
                ids=docs, nll=list(map(float, nll)), tokens=[10] * len(docs), bytes=[40] * len(docs)
            )
        },
        harness={"story_endings": {"acc": ItemRecord(ids=ids, values=list(map(float, accuracy)))}},
        exact_match={
            "tinystories_qa": ItemRecord(
                ids=[f"{i}:q" for i in range(len(extras.exact_match))], values=list(extras.exact_match)
            )
        }
        if extras.exact_match
        else {},
    )
    Path(output_path, "results.json").write_bytes(results.to_bytes())
    Path(output_path, "items.json").write_bytes(items.to_bytes())
    return {"headline": {"metric": "story_endings/acc", **acc.to_json()}}


def run_stand_ins(
    prefix: Path,
    runs: dict[str, tuple[float, int, Sequence[float], Sequence[float]]],
    extras: dict[str, tuple[dict[str, Any], Extras]] | None = None,
) -> dict[str, str]:
    """`{eval name: (learning rate, seed, per-item accuracy, per-document nll)}` as train and evaluation
    steps under `prefix`; `extras` gives some of them more of their train step's key and an `Extras`.
    The evaluations' output folders by name."""
    evals = []
    for name, (lr, seed, accuracy, nll) in runs.items():
        more_key, more = (extras or {}).get(name, ({}, Extras()))
        model = StepSpec(
            name=f"checkpoints/{name.rsplit('/', 1)[-1]}",
            fn=_train,
            hash_attrs={"optimizer": {"learning_rate": lr}, "seed": seed, "num_train_steps": 10, **more_key},
        )
        # the scores are bound as arrays and a dataclass, not JSON: out of the code fingerprint
        scored = functools.partial(_evaluate, np.asarray(accuracy), np.asarray(nll), more)
        evals.append(
            StepSpec(
                name=name,
                fn=scored,
                deps=[model],
                hash_attrs={"model": {"step": model.name}, "harness_items": len(accuracy)},
            )
        )
    result = StepRunner(prefix=str(prefix), progress=False).run(evals)
    return {spec.name: result.output_path(spec) for spec in evals}


def simulated_scores(
    rng: np.random.Generator, p: float, seed_sd: float, items: int, base: np.ndarray
) -> tuple[list[float], list[float]]:
    """One model's per-item accuracy (around `p`, shifted by its seed) and document nll (around `base`)."""
    shift = rng.normal(0, seed_sd)
    logit = math.log(p / (1 - p)) + shift
    correct = (rng.random(items) < 1 / (1 + math.exp(-logit))).astype(float)
    nll = base * (1 + shift) + rng.normal(0, 0.2, len(base))
    return correct.tolist(), nll.tolist()
