"""`evaluate()`: declare an evaluation step of a trained model. Declaring runs nothing.

    ev = evaluate("eval/nano-tinystories", model_step=nano_model,
                  datasets=[tinystories_tokenized, TextDataset("notes", ("notes.jsonl",))],
                  harness_tasks=("marin_story_endings", "marin_text_perplexity"),
                  prompts=("Once upon a time",))
    StepRunner().run([lower(ev)])

The step writes `results.json` (loss, perplexity and bits-per-byte per dataset and domain, micro
and macro averages, harness metrics, samples); the step's result, stored by the runner in
`.artifact.json` under `"result"`, carries `"headline": {"metric": "bpb", "value": ...}`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from marin.evaluation.documents import TextDataset
from marin.evaluation.evaluation_step import EvaluationConfig, TokenCacheRef, run_evaluation
from marin.evaluation.samples import SamplingConfig
from marin.evaluation.sweep_report import SweepReportConfig, run_sweep_report
from marin.execution.errors import StepDefinitionError
from marin.execution.lazy import LazyStep, lower
from marin.execution.step_spec import StepSpec


@dataclass(frozen=True)
class Evaluation:
    """Lazy handle of an evaluation step; `to_step_spec()` lowers the model and token-cache steps too."""

    name: str
    model_step: Any
    datasets: tuple[Any, ...] = ()
    harness_tasks: tuple[str, ...] = ()
    prompts: tuple[str, ...] = ()
    eval_split: str = "validation"
    harness_stories: TextDataset | None = None
    harness_items: int = 50
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    batch_size: int = 8
    max_length: int | None = None
    max_documents: int | None = None
    version: str | None = None
    resources: Any = None
    adopt: bool = False  # take an existing evaluation folder at the output path (see StepSpec.adopt)

    def to_step_spec(self) -> StepSpec:
        """The StepSpec: deps are the model step and every tokenized dataset, hash_attrs the whole config."""
        model = lower(self.model_step)
        deps = [model]
        datasets: list[TextDataset | TokenCacheRef] = []
        for dataset in self.datasets:
            if isinstance(dataset, TextDataset):
                datasets.append(dataset)
            else:
                spec = lower(dataset)
                if spec not in deps:
                    deps.append(spec)
                datasets.append(TokenCacheRef(spec.name, self.eval_split))
        config = EvaluationConfig(
            model_step=model.name,
            datasets=tuple(datasets),
            harness_tasks=self.harness_tasks,
            harness_stories=self.harness_stories,
            harness_items=self.harness_items,
            prompts=self.prompts,
            sampling=self.sampling,
            batch_size=self.batch_size,
            max_length=self.max_length,
            max_documents=self.max_documents,
        )
        return StepSpec(
            name=self.name,
            fn=functools.partial(run_evaluation, config),
            deps=deps,
            hash_attrs=config.to_json(),
            version=self.version,
            resources=self.resources,
            adopt=self.adopt,
        )


def evaluate(
    name: str,
    model_step: Any,
    datasets: Sequence[Any] = (),
    harness_tasks: Sequence[str] = (),
    prompts: Sequence[str] = (),
    **options: Any,
) -> Evaluation:
    """Declare the evaluation of `model_step` (a `train_lm()` handle or a StepSpec with an `hf/` export).

    `datasets` holds `tokenized()` handles / StepSpecs of token caches (their `eval_split` is
    scored) and `TextDataset`s of raw text. `harness_tasks` names lm-eval-harness tasks, such as our
    own `marin_story_endings` and `marin_text_perplexity`. `prompts` get a greedy continuation and
    seeded samples (`sampling=SamplingConfig(...)`). Other options: see `Evaluation` (`adopt=True` takes
    an existing folder at the step's output path as its result; see StepSpec.adopt).
    """
    if not isinstance(model_step, (StepSpec, LazyStep)):
        raise StepDefinitionError(
            f"evaluation {name!r}: model_step must be a train_lm() handle or a StepSpec, got "
            f"{type(model_step).__name__}"
        )
    if not (datasets or harness_tasks or prompts):
        raise StepDefinitionError(
            f"evaluation {name!r} has nothing to do: give datasets, harness_tasks or prompts"
        )
    for dataset in datasets:
        if not isinstance(dataset, (TextDataset, StepSpec, LazyStep)):
            raise StepDefinitionError(
                f"evaluation {name!r}: datasets take tokenized() handles, StepSpecs or TextDataset, "
                f"got {type(dataset).__name__}"
            )
    return Evaluation(
        name=name,
        model_step=model_step,
        datasets=tuple(datasets),
        harness_tasks=tuple(harness_tasks),
        prompts=tuple(prompts),
        **options,
    )


@dataclass(frozen=True)
class SweepReport:
    """Lazy handle of a sweep-report step over several trained models (see `sweep_report`)."""

    name: str
    models: tuple[tuple[str, Any], ...]
    metrics: tuple[str, ...] = ("eval_loss", "eval_bpb")
    x_key: str = "tokens"
    version: str | None = None

    def to_step_spec(self) -> StepSpec:
        """The StepSpec: deps are the train steps, hash_attrs the labels, metrics and x axis."""
        specs = [(label, lower(model)) for label, model in self.models]
        config = SweepReportConfig(
            tuple((label, spec.name) for label, spec in specs), self.metrics, self.x_key
        )
        return StepSpec(
            name=self.name,
            fn=functools.partial(run_sweep_report, config),
            deps=list(dict.fromkeys(spec for _, spec in specs)),
            hash_attrs=config.to_json(),
            version=self.version,
        )


def sweep_report(
    name: str,
    models: Mapping[str, Any],
    metrics: Sequence[str] = ("eval_loss", "eval_bpb"),
    x_key: str = "tokens",
    version: str | None = None,
) -> SweepReport:
    """Declare a report comparing trained models by label (e.g. `{"lr=3e-4": model, ...}`).

    The step writes `table.md`, `table.csv` and `plot.png`: each eval metric of each run's
    `metrics.jsonl` against training tokens, and the final and best value per run.
    """
    if not models:
        raise StepDefinitionError(f"sweep report {name!r}: give at least one trained model")
    for label, model in models.items():
        if not isinstance(model, (StepSpec, LazyStep)):
            raise StepDefinitionError(
                f"sweep report {name!r}: model {label!r} must be a train_lm() handle or a StepSpec, "
                f"got {type(model).__name__}"
            )
    return SweepReport(name, tuple(models.items()), tuple(metrics), x_key, version)
