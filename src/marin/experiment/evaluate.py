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

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from marin.evaluation.documents import TextDataset
from marin.evaluation.evaluation_step import EvalOptions, EvaluationConfig, TokenCacheRef, run_evaluation
from marin.evaluation.sweep_report import SweepReportConfig, run_sweep_report
from marin.execution.errors import StepDefinitionError
from marin.execution.keyed import hash_attrs_of
from marin.execution.lazy import LazyStep, StepOptions, lower
from marin.execution.step_spec import StepSpec

if TYPE_CHECKING:
    from marin.experiment.data import TokenizedData
    from marin.experiment.train import TrainLm


@dataclass(frozen=True)
class Evaluation(EvalOptions, StepOptions):
    """Declare the evaluation of `model_step` (a `train_lm()` handle or a StepSpec with an `hf/` export).

    `evaluate` is this class: its parameters are `name`, `model_step`, `datasets`, then by keyword
    the `EvalOptions` fields (`harness_tasks`, `prompts`, `sampling`, `batch_size`, `max_length`,
    `max_documents`, `harness_stories`, `harness_items`), the `StepOptions` every step has
    (`version`, `adopt`, `resources`) and the step's own below, each declared once, so editors
    complete and type-check the call. `datasets` holds `tokenized()` handles / StepSpecs of token
    caches (their `eval_split` is scored) and `TextDataset`s of raw text.
    `harness_tasks` names lm-eval-harness tasks, such as our own `marin_story_endings` and
    `marin_text_perplexity`. `prompts` get a greedy continuation and seeded samples
    (`sampling=SamplingConfig(...)`). `adopt=True` takes an existing folder at the step's output
    path as its result (see StepSpec.adopt). The key is the EvaluationConfig's key fields: every
    option but `batch_size`, which changes no score.
    """

    helper: ClassVar[str] = "evaluate"
    model_step: TrainLm | StepSpec | LazyStep
    datasets: Sequence[TokenizedData | StepSpec | LazyStep | TextDataset] = ()
    _: KW_ONLY
    eval_split: str = "validation"

    def __post_init__(self) -> None:
        super().__post_init__()
        name = self.name
        if not isinstance(self.model_step, (StepSpec, LazyStep)):
            raise StepDefinitionError(
                f"evaluation {name!r}: model_step must be a train_lm() handle or a StepSpec, got "
                f"{type(self.model_step).__name__}"
            )
        object.__setattr__(self, "datasets", tuple(self.datasets))
        if not (self.datasets or self.harness_tasks or self.prompts):
            raise StepDefinitionError(
                f"evaluation {name!r} has nothing to do: give datasets, harness_tasks or prompts"
            )
        for dataset in self.datasets:
            if not isinstance(dataset, (TextDataset, StepSpec, LazyStep)):
                raise StepDefinitionError(
                    f"evaluation {name!r}: datasets take tokenized() handles, StepSpecs or TextDataset, "
                    f"got {type(dataset).__name__}"
                )

    def to_step_spec(self) -> StepSpec:
        """The StepSpec: deps are the model step and every tokenized dataset, hash_attrs the config's key fields."""
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
        options = {f.name: getattr(self, f.name) for f in dataclasses.fields(EvalOptions)}
        config = EvaluationConfig(model_step=model.name, datasets=tuple(datasets), **options)
        return StepSpec(
            fn=functools.partial(run_evaluation, config),
            deps=deps,
            hash_attrs=hash_attrs_of(config),
            **self.spec_options(),
        )


evaluate = Evaluation


@dataclass(frozen=True)
class SweepReport(StepOptions):
    """Lazy handle of a sweep-report step over several trained models (made by `sweep_report`)."""

    _: KW_ONLY
    models: tuple[tuple[str, TrainLm | StepSpec | LazyStep], ...]
    metrics: tuple[str, ...] = ("eval_loss", "eval_bpb")
    x_key: str = "tokens"

    def to_step_spec(self) -> StepSpec:
        """The StepSpec: deps are the train steps, hash_attrs the labels, metrics and x axis."""
        specs = [(label, lower(model)) for label, model in self.models]
        config = SweepReportConfig(
            tuple((label, spec.name) for label, spec in specs), self.metrics, self.x_key
        )
        return StepSpec(
            fn=functools.partial(run_sweep_report, config),
            deps=list(dict.fromkeys(spec for _, spec in specs)),
            hash_attrs=hash_attrs_of(config),
            **self.spec_options(),
        )


def sweep_report(
    name: str,
    models: Mapping[str, Any],
    metrics: Sequence[str] = ("eval_loss", "eval_bpb"),
    x_key: str = "tokens",
    **options: Any,
) -> SweepReport:
    """Declare a report comparing trained models by label (e.g. `{"lr=3e-4": model, ...}`).

    The step writes `table.md`, `table.csv` and `plot.png`: each eval metric of each run's
    `metrics.jsonl` against training tokens, and the final and best value per run. `options` are
    the `StepOptions` (version, adopt, resources).
    """
    if not isinstance(models, Mapping) or not models:
        raise StepDefinitionError(
            f"sweep report {name!r}: give at least one trained model, as {{label: model}}"
        )
    for label, model in models.items():
        if not isinstance(model, (StepSpec, LazyStep)):
            raise StepDefinitionError(
                f"sweep report {name!r}: model {label!r} must be a train_lm() handle or a StepSpec, "
                f"got {type(model).__name__}"
            )
    return SweepReport(name, models=tuple(models.items()), metrics=tuple(metrics), x_key=x_key, **options)
