"""`evaluate()`: declare an evaluation step of a model. Declaring runs nothing.

    ev = evaluate("eval/nano-tinystories", model=nano_model,
                  datasets=[tinystories_tokenized, TextDataset("notes", ("notes.jsonl",))],
                  harness_tasks=("marin_story_endings", "marin_text_perplexity"),
                  prompts=("Once upon a time",))
    baseline = evaluate("eval/gpt2-core", model="openai-community/gpt2", suite="core")
    StepRunner().run([lower(ev), lower(baseline)])

The step writes `results.json` (loss, perplexity and bits-per-byte per dataset and domain, micro
and macro averages, harness and suite metrics, samples), every number a metric object with its
interval; the step's result, stored by the runner in `.artifact.json` under `"result"`, carries
`"headline": {"metric": "bpb", "value": ..., "stderr": ..., "ci95": [...], "n": ...}`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import orjson

from marin.evaluation.documents import TextDataset
from marin.evaluation.errors import ModelSourceError, SuiteError
from marin.evaluation.evaluation_step import EvalOptions, EvaluationConfig, TokenCacheRef, run_evaluation
from marin.evaluation.model_source import ModelKind, ModelSource, from_string
from marin.evaluation.score_cache import DEFAULT_FLUSH_S, resume_note
from marin.evaluation.suites import Suite
from marin.evaluation.suites import suite as find_suite
from marin.evaluation.sweep_report import SweepReportConfig, run_sweep_report
from marin.execution.errors import StepDefinitionError
from marin.execution.keyed import hash_attrs_of
from marin.execution.lazy import LazyStep, StepOptions, lower
from marin.execution.step_spec import StepSpec
from marin.experiment.declared_names import check_harness_tasks
from marin.experiment.own_generation import load_generator
from marin.experiment.replicate import Replicates, seeded_name

if TYPE_CHECKING:
    from marin.experiment.data import TokenizedData
    from marin.experiment.train import TrainLm


@dataclass(frozen=True)
class Evaluation(EvalOptions, StepOptions):
    """Declare the evaluation of `model`: a `train_lm()` handle or StepSpec (its `hf/` export), a
    Hugging Face folder (a local path, or an `s3://` / `gs://` URL), or a hub id (`ORG/NAME`,
    `ORG/NAME@REVISION`).

    `evaluate` is this class: its parameters are `name`, `model`, `datasets`, then by keyword
    `suite` (a name in `marin.evaluation.suites.SUITES`, such as `"core"`, or a `Suite`), the
    `EvalOptions` fields (`harness_tasks`, `prompts`, `sampling`, `batch_size`, `max_length`,
    `max_documents`, `limit`, `harness_stories`, `harness_items`, `bootstrap_iters`,
    `bootstrap_seed`, `exact_match`, `contamination`, `num_processes`, `score_flush_s`), the
    `StepOptions` every step has (`version`, `adopt`,
    `resources`) and the step's own below, each declared once, so editors complete and type-check
    the call. `datasets` holds `tokenized()` handles / StepSpecs of token caches (their
    `eval_split` is scored) and `TextDataset`s of raw text, whose files are the step's declared
    inputs (edit one and the evaluation reruns, the plan naming the file). `harness_tasks` names
    lm-eval-harness tasks, such as our own `marin_story_endings` and `marin_text_perplexity`.
    `prompts` get a greedy continuation and seeded samples (`sampling=SamplingConfig(...)`).
    `exact_match=ExactMatchTask()` scores the model's greedy replies to chat prompts with known
    answers (by default 400 held-out questions of `marin://tinystories-qa`) by exact match, with
    Wilson intervals. `contamination=True` checks every scored item against the model's training
    data, found from its lineage, and reports each metric on all items and on the clean ones
    (`marin.evaluation.contamination`). Scores are kept as they come (`marin.evaluation.score_cache`):
    a killed run resumes, with any `num_processes`. `adopt=True` takes an existing folder at the
    step's output path as its result (see StepSpec.adopt). The key is the EvaluationConfig's key
    fields: every option but `batch_size`, `num_processes` and `score_flush_s`, which change no
    score; a folder model enters by its files' digests, a hub model by its commit.
    `model=replicate(train_lm(...), seeds=...)` declares one evaluation per seed (`name-seed<N>`),
    returned as `Replicates` (`marin.experiment.replicate`).
    """

    helper: ClassVar[str] = "evaluate"
    model: TrainLm | StepSpec | LazyStep | str | ModelSource | Replicates
    datasets: Sequence[TokenizedData | StepSpec | LazyStep | TextDataset] = ()
    _: KW_ONLY
    suite: str | Suite | None = None
    checkpoints: str | Sequence[int] | None = None
    eval_split: str = "validation"

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        """An evaluation; or, for `model=` replicates (`marin.experiment.replicate`), the `Replicates` of
        one evaluation per seed, each named `name-seed<N>`."""
        model = kwargs.get("model", args[1] if len(args) > 1 else None)
        if not isinstance(model, Replicates):
            return super().__new__(cls)
        name = kwargs.pop("name", None) if "name" in kwargs else args[0]
        rest = args[2:] if len(args) > 2 else ()
        kwargs.pop("model", None)
        return model.map(lambda handle, seed: cls(seeded_name(name, seed), handle, *rest, **kwargs), name)

    def __post_init__(self) -> None:
        super().__post_init__()
        name = self.name
        if not isinstance(self.model, (StepSpec, LazyStep, str, ModelSource)):
            raise StepDefinitionError(
                f"evaluation {name!r}: model must be a train_lm() handle, a StepSpec, a Hugging Face folder "
                f"or URL, or a hub id, got {type(self.model).__name__}"
            )
        if isinstance(self.model, str):
            try:
                object.__setattr__(self, "model", from_string(self.model))
            except ModelSourceError as e:
                raise ModelSourceError(f"evaluation {name!r}: {e}") from None
        if self.suite is not None:
            try:
                object.__setattr__(self, "suite", find_suite(self.suite))
            except SuiteError as e:
                raise SuiteError(f"evaluation {name!r}: suite={self.suite!r}: {e}") from None
        check_harness_tasks(f"evaluation {name!r}", "harness_tasks", self.harness_tasks)
        self._check_checkpoints()
        if self.contamination is not None and isinstance(self.model, ModelSource):
            raise StepDefinitionError(
                f"evaluation {name!r}: contamination=True needs the training data of the model, which marin knows "
                f"only for a model it trained; model={self.model.label()!r} is not a train_lm() handle or StepSpec"
            )
        object.__setattr__(self, "datasets", tuple(self.datasets))
        if not (self.datasets or self.harness_tasks or self.prompts or self.suite or self.exact_match):
            raise StepDefinitionError(
                f"evaluation {name!r} has nothing to do: give datasets, a suite, harness_tasks, prompts "
                "or exact_match"
            )
        for dataset in self.datasets:
            if not isinstance(dataset, (TextDataset, StepSpec, LazyStep)):
                raise StepDefinitionError(
                    f"evaluation {name!r}: datasets take tokenized() handles, StepSpecs or TextDataset, "
                    f"got {type(dataset).__name__}"
                )

    def _check_checkpoints(self) -> None:
        """`checkpoints="all"` or a list of steps, of a train step that exports them; refused now when it cannot."""
        chosen = self.checkpoints
        if chosen is None:
            return
        where = f"evaluation {self.name!r}: checkpoints={chosen!r}"
        if isinstance(self.model, ModelSource):
            raise StepDefinitionError(
                f"{where}: scores a train step's intermediate exports; model= is not a step"
            )
        if chosen != "all":
            if isinstance(chosen, str) or not all(
                isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in chosen
            ):
                raise StepDefinitionError(f'{where}: give "all" or a list of positive step numbers')
            object.__setattr__(self, "checkpoints", tuple(sorted(set(chosen))))
        config = getattr(self.model, "config", None)  # a train_lm() handle knows what it will export
        every = getattr(config, "export_every", None) if config is not None else None
        if config is None or not hasattr(config, "num_train_steps"):
            return  # a StepSpec: its exports are checked when the evaluation runs
        if not every:
            raise StepDefinitionError(
                f"{where}: the model step exports no checkpoints; train it with train_lm(..., export_every=N)"
            )
        from marin.training.callbacks import export_steps

        exported = export_steps(every, config.num_train_steps)
        missing = [s for s in self.checkpoints if s not in exported] if self.checkpoints != "all" else []
        if missing:
            raise StepDefinitionError(
                f"{where}: step(s) {missing} will not exist; with export_every={every} and "
                f"num_train_steps={config.num_train_steps} the exports are steps {exported}"
            )

    def to_step_spec(self) -> StepSpec:
        """The StepSpec: deps are a model step and every tokenized dataset; inputs a model folder's files
        and every TextDataset's; hash_attrs the config's key fields."""
        deps: list[StepSpec] = []
        inputs: list[str] = []
        if isinstance(self.model, ModelSource):
            source = self.model
            inputs.extend(source.inputs)
        else:
            spec = lower(self.model)
            deps.append(spec)
            source = ModelSource(ModelKind.STEP, spec.name, config=effective_config(self.model))
        datasets: list[TextDataset | TokenCacheRef] = []
        for dataset in self.datasets:
            if isinstance(dataset, TextDataset):
                datasets.append(dataset)
                inputs.extend(p for p in dataset.paths if p not in inputs)
            else:
                spec = lower(dataset)
                if spec not in deps:
                    deps.append(spec)
                datasets.append(TokenCacheRef(spec.name, self.eval_split))
        options = {f.name: getattr(self, f.name) for f in dataclasses.fields(EvalOptions)}
        config = EvaluationConfig(
            model=source,
            datasets=tuple(datasets),
            suite=self.suite,
            checkpoints=self.checkpoints,
            generator=load_generator if source.kind == ModelKind.STEP else None,
            **options,
        )
        return StepSpec(
            fn=functools.partial(run_evaluation, config),
            deps=deps,
            hash_attrs=hash_attrs_of(config),
            inputs=inputs,
            resumable=True,  # scores are kept as they come (score_cache): a rerun scores only the rest
            resume_note=resume_note,
            **self.spec_options(),
        )


evaluate = Evaluation


def _model_of(where: str, model: Any, field: str = "model") -> Any:
    """A model argument checked and resolved: a handle or StepSpec as given, a string to a ModelSource."""
    if not isinstance(model, (StepSpec, LazyStep, str, ModelSource)):
        raise StepDefinitionError(
            f"{where}: {field} must be a train_lm() handle, a StepSpec, a Hugging Face folder or URL, or a hub "
            f"id, got {type(model).__name__}"
        )
    if isinstance(model, str):
        try:
            return from_string(model, field)
        except ModelSourceError as e:
            raise ModelSourceError(f"{where}: {e}") from None
    return model


def _lowered_model(model: Any, deps: list[StepSpec], inputs: list[str]) -> ModelSource:
    """The ModelSource of a resolved model argument, adding its step to `deps` or its files to `inputs`."""
    if isinstance(model, ModelSource):
        inputs.extend(p for p in model.inputs if p not in inputs)
        return model
    spec = lower(model)
    if spec not in deps:
        deps.append(spec)
    return ModelSource(ModelKind.STEP, spec.name)


@dataclass(frozen=True)
class PerplexityGap(StepOptions):
    """Declare where two models differ on the same raw text: `perplexity_gap(name, model_a=..., model_b=...,
    datasets=[TextDataset(...)])`.

    Each model is what `evaluate(model=...)` takes (a train_lm() handle or StepSpec, a Hugging Face
    folder or URL, a hub id); their tokenizers may differ, since the step compares them byte by byte.
    The step writes `gap.json` and `gap.md` (`marin.evaluation.gap`: the gap in bits per byte with its
    paired interval, split by byte class and domain, and the documents and spans where each wins) and
    each model's per-document scores; `marin gap A B` prints the same report for two evaluations.
    Its headline is the gap, `bpb(a) - bpb(b)`. `batch_size` and `score_flush_s` are not in the key.
    """

    helper: ClassVar[str] = "perplexity_gap"
    _: KW_ONLY
    model_a: TrainLm | StepSpec | LazyStep | str | ModelSource
    model_b: TrainLm | StepSpec | LazyStep | str | ModelSource
    datasets: Sequence[TextDataset] = ()
    max_documents: int | None = None
    max_length: int | None = None
    top: int = 10
    batch_size: int = 8
    score_flush_s: float = DEFAULT_FLUSH_S

    def __post_init__(self) -> None:
        where = f"perplexity_gap {self.name!r}"
        object.__setattr__(self, "model_a", _model_of(where, self.model_a, "model_a"))
        object.__setattr__(self, "model_b", _model_of(where, self.model_b, "model_b"))
        object.__setattr__(self, "datasets", tuple(self.datasets))
        if not self.datasets or not all(isinstance(d, TextDataset) for d in self.datasets):
            raise StepDefinitionError(
                f"{where}: datasets takes TextDatasets of raw text (the models are compared byte by byte, so "
                "each reads the text with its own tokenizer); give at least one"
            )

    def to_step_spec(self) -> StepSpec:
        """The StepSpec: deps are the model steps; inputs the folders' and datasets' files."""
        from marin.evaluation.gap_step import GapConfig, run_perplexity_gap

        deps: list[StepSpec] = []
        inputs: list[str] = []
        a = _lowered_model(self.model_a, deps, inputs)
        b = _lowered_model(self.model_b, deps, inputs)
        for dataset in self.datasets:
            inputs.extend(p for p in dataset.paths if p not in inputs)
        config = GapConfig(
            model_a=a,
            model_b=b,
            datasets=self.datasets,
            max_documents=self.max_documents,
            max_length=self.max_length,
            top=self.top,
            batch_size=self.batch_size,
            score_flush_s=self.score_flush_s,
        )
        return StepSpec(
            fn=functools.partial(run_perplexity_gap, config),
            deps=deps,
            hash_attrs=hash_attrs_of(config),
            inputs=inputs,
            resumable=True,  # scores are kept as they come (score_cache): a rerun scores only the rest
            resume_note=resume_note,
            **self.spec_options(),
        )


perplexity_gap = PerplexityGap


def effective_config(handle: Any) -> dict[str, Any] | None:
    """A model handle's effective configuration: its architecture's config with every field (defaults
    included) and, for LoRA post-training, its LoRA settings; None when the handle does not declare
    one (a StepSpec, or post-training of a folder or hub model).

    A post-training handle's `model` is the handle it starts from, whose architecture it keeps.
    """
    lora = getattr(handle, "lora", None)
    model = getattr(handle, "model", None)
    for _ in range(16):  # a chain of post-training handles down to the architecture's config
        if model is None or hasattr(model, "architecture"):
            break
        model = getattr(model, "model", None)
    if model is None or not hasattr(model, "architecture") or not dataclasses.is_dataclass(model):
        return None
    out: dict[str, Any] = {"architecture": model.architecture, "model": dataclasses.asdict(model)}
    if lora is not None and dataclasses.is_dataclass(lora):
        out["lora"] = dataclasses.asdict(lora)
    return orjson.loads(orjson.dumps(out))


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
    """Declare a report comparing trained models by label (e.g. `{"lr=3e-4": model, ...}`); a label's
    value may be `replicate(model, seeds=...)`, the setting's runs over several seeds.

    The step writes `table.md`, `table.csv` and `plot.png`: each eval metric of each run's
    `metrics.jsonl` against training tokens, the final and best value per run, and per setting (runs
    whose keys differ only in seeds) the final value over its seeds with its interval; it names a best
    setting only when it is separable from the runner-up. `options` are the `StepOptions` (version,
    adopt, resources).
    """
    if not isinstance(models, Mapping) or not models:
        raise StepDefinitionError(
            f"sweep report {name!r}: give at least one trained model, as {{label: model}}"
        )
    runs: list[tuple[str, Any]] = []
    for label, model in models.items():
        if isinstance(model, Replicates):
            runs += [
                (f"{label} seed={seed}", handle) for handle, seed in zip(model, model.seeds, strict=True)
            ]
        else:
            runs.append((label, model))
    for label, model in runs:
        if not isinstance(model, (StepSpec, LazyStep)):
            raise StepDefinitionError(
                f"sweep report {name!r}: model {label!r} must be a train_lm() handle, a StepSpec or "
                f"replicate(...) of one, got {type(model).__name__}"
            )
    return SweepReport(name, models=tuple(runs), metrics=tuple(metrics), x_key=x_key, **options)
