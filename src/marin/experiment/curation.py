"""Curation steps as lazy handles: extract_text, filter_language, filter_quality, dedup_exact,
dedup_fuzzy, decontaminate and mix; and the model-based quality steps train_quality_classifier,
score_documents and filter_by_score.

Like `tokenized()`, each is a frozen dataclass that reads nothing when declared; `to_step_spec()`
builds the StepSpec. Each parameter is declared once, on the class that takes it: the step
options (name, version, adopt, resources) on `StepOptions`, what every curation step takes
(`bad_records`, `zephyr`, `allow_empty`) on `CurationStep`, an input and `rejected=` on
`InputStep`. An `input` is a path or glob, `marin://web-synth`, a StepSpec or a handle (a
dependency whose output files are read), or a list of those; the files and globs are the step's
declared inputs (their digests are in its key). Every parameter that changes the output (rules and
thresholds, languages, MinHash settings) is in the key; the zephyr backend and worker count and
`allow_empty` are not. Each step writes `part-*.jsonl.zst` shards and `stats.json`; with
`rejected=True` (all but `mix`) also each dropped document with the rule that dropped it, under
`_rejected/`. Inputs that yield no document fail the step, naming them, unless `allow_empty=True`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

from marin.curation.attributes import ScoreConfig, run_score_step
from marin.curation.classifier import ClassifierConfig, FastTextParams, run_train_classifier
from marin.curation.cut import CutConfig, ScoreSet, run_filter_by_score
from marin.curation.dedup import DedupConfig, run_dedup_step
from marin.curation.documents import STEP_PREFIX, CurationError, check_input, declared_files
from marin.curation.extract import ExtractText
from marin.curation.filters import DecontaminateSpec, FilterLanguage, FilterQuality
from marin.curation.mix import MixConfig, run_mix_step
from marin.curation.rules import make_rules
from marin.curation.scorers import SCORERS, FastTextClassifier, HFClassifier
from marin.curation.steps import DocumentStepConfig, run_document_step
from marin.evaluation.documents import TextDataset
from marin.execution.errors import StepDefinitionError
from marin.execution.keyed import hash_attrs_of
from marin.execution.lazy import LazyStep, StepOptions, lower
from marin.execution.step_spec import StepSpec
from marin.experiment.mixture import Mixture
from zephyr.io import BAD_RECORD_POLICIES

if TYPE_CHECKING:
    from zephyr import ZephyrConfig

__all__ = [
    "CurationStep",
    "decontaminate",
    "dedup_exact",
    "dedup_fuzzy",
    "extract_text",
    "filter_language",
    "filter_by_score",
    "filter_quality",
    "mix",
    "score_documents",
    "train_quality_classifier",
]

DEFAULT_QUALITY_RULES = ("gopher_quality", "gopher_repetition", "c4", "fineweb")


@dataclass(frozen=True)
class CurationStep(StepOptions):
    """What every curation step takes: how malformed records are treated (`bad_records`: "fail"
    names file:line, "skip" drops and counts them), how zephyr runs it (`zephyr`, not in the key),
    and whether inputs that yield no document are accepted (`allow_empty`, not in the key).

    A subclass says what its step runs (`run`, a module-level `run_*(config, output_path)`) and on
    which frozen config (`config`, keyed by `marin.execution.keyed.hash_attrs_of`); the files and
    globs that config reads are the step's declared inputs.
    """

    _: KW_ONLY
    bad_records: str = "fail"
    zephyr: ZephyrConfig | None = None
    allow_empty: bool = False

    run: ClassVar[Any]

    def __post_init__(self) -> None:
        if not self.name:
            raise StepDefinitionError(f"{self.helper}: the step name must be a non-empty string")
        if self.bad_records not in BAD_RECORD_POLICIES:
            raise StepDefinitionError(
                f"{self.helper} {self.name!r}: bad_records={self.bad_records!r}; choose one of {BAD_RECORD_POLICIES}"
            )
        self.config  # noqa: B018 - build the config now: a bad parameter fails at declaration

    @property
    def config(
        self,
    ) -> DocumentStepConfig | DedupConfig | MixConfig | ClassifierConfig | ScoreConfig | CutConfig:
        raise NotImplementedError

    def input_steps(self) -> tuple:
        """The steps and handles among the inputs: the step's dependencies."""
        raise NotImplementedError

    def to_step_spec(self) -> StepSpec:
        return StepSpec(
            fn=partial(type(self).run, self.config),
            deps=tuple(dict.fromkeys(lower(s) for s in self.input_steps())),
            hash_attrs=hash_attrs_of(self.config),
            inputs=declared_files(self.config.input_names()),
            **self.spec_options(),
        )

    def _inputs(self, value: Any, arg: str) -> tuple[tuple[str, ...], tuple]:
        return _inputs(self.name, value, arg)


@dataclass(frozen=True)
class InputStep(CurationStep):
    """A curation step over one input (a path, glob, corpus, step or handle, or a list of those);
    `rejected=True` also writes each dropped document, with its reason, under `_rejected/`."""

    input: Any
    _: KW_ONLY
    rejected: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.input, list):
            object.__setattr__(self, "input", tuple(self.input))
        super().__post_init__()

    @functools.cached_property
    def _parsed_input(self) -> tuple[tuple[str, ...], tuple]:
        return self._inputs(self.input, "input")

    def input_steps(self) -> tuple:
        return self._parsed_input[1]


@dataclass(frozen=True)
class DocumentStep(InputStep):
    """A per-document step: `transform()` is applied to every document of the input."""

    kind: ClassVar[str]
    run = staticmethod(run_document_step)

    def transform(self) -> Any:
        raise NotImplementedError

    @functools.cached_property
    def config(self) -> DocumentStepConfig:
        return DocumentStepConfig(
            self.kind,
            self._parsed_input[0],
            self.transform(),
            bad_records=self.bad_records,
            zephyr=self.zephyr,
            rejected=bool(self.rejected),
            allow_empty=self.allow_empty,
        )


@dataclass(frozen=True)
class ExtractTextStep(DocumentStep):
    """Extract the main text of web pages with resiliparse (menus, footers, banners removed).

    format="html": JSON records whose `html_key` holds the page (e.g. marin://web-synth);
    format="warc": .warc(.gz) files, one document per HTTP response. Output records hold "text".
    """

    helper: ClassVar[str] = "extract_text"
    kind: ClassVar[str] = "extract_text"
    _: KW_ONLY
    format: str = "html"
    html_key: str = "html"

    def transform(self) -> ExtractText:
        if self.format not in ("html", "warc"):
            raise StepDefinitionError(
                f"extract_text {self.name!r}: format must be 'html' or 'warc', got {self.format!r}"
            )
        return ExtractText(self.html_key, format=self.format)


@dataclass(frozen=True)
class FilterLanguageStep(DocumentStep):
    """Keep documents whose language (py3langid, bundled model) is in `languages` with probability >= min_score."""

    helper: ClassVar[str] = "filter_language"
    kind: ClassVar[str] = "filter_language"
    _: KW_ONLY
    languages: Sequence[str] = ("en",)
    min_score: float = 0.65
    text_key: str = "text"

    def transform(self) -> FilterLanguage:
        languages = self.languages
        if isinstance(languages, str) or not languages or not all(isinstance(x, str) for x in languages):
            raise StepDefinitionError(
                f"filter_language {self.name!r}: languages must be a list of ISO 639-1 codes, got {languages!r}"
            )
        if not 0 <= self.min_score <= 1:
            raise StepDefinitionError(
                f"filter_language {self.name!r}: min_score must be in [0, 1], got {self.min_score!r}"
            )
        return FilterLanguage(tuple(languages), float(self.min_score), self.text_key)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "languages", tuple(self.languages) if isinstance(self.languages, list) else self.languages
        )
        super().__post_init__()


@dataclass(frozen=True)
class FilterQualityStep(DocumentStep):
    """Apply quality rules in order (names take the published thresholds, or pass e.g.
    `GopherQuality(min_doc_words=100)`)."""

    helper: ClassVar[str] = "filter_quality"
    kind: ClassVar[str] = "filter_quality"
    _: KW_ONLY
    rules: Sequence[Any] = DEFAULT_QUALITY_RULES
    text_key: str = "text"

    def __post_init__(self) -> None:
        object.__setattr__(self, "rules", tuple(self.rules))
        super().__post_init__()

    def transform(self) -> FilterQuality:
        try:
            made = make_rules(self.rules)
        except ValueError as e:
            raise StepDefinitionError(f"filter_quality {self.name!r}: {e}") from None
        return FilterQuality(made, self.text_key)


@dataclass(frozen=True)
class DecontaminateStep(DocumentStep):
    """Drop documents sharing any word `ngram`-gram with the evaluation data in `against`: paths or
    globs, steps or handles, `TextDataset`s (their paths, read at their `text_field`) or
    `marin://tinystories-synth` (optionally `?start=A&stop=B`, e.g. the stories an evaluation reads)."""

    helper: ClassVar[str] = "decontaminate"
    kind: ClassVar[str] = "decontaminate"
    _: KW_ONLY
    against: Any
    ngram: int = 13
    text_key: str = "text"
    against_key: str = "text"

    def __post_init__(self) -> None:
        against = self.against
        if isinstance(against, (str, os.PathLike, TextDataset)) or not isinstance(against, Sequence):
            against = [against]
        object.__setattr__(self, "against", tuple(against))
        super().__post_init__()

    @functools.cached_property
    def _parsed_against(self) -> tuple[tuple[str, ...], tuple[str, ...], tuple]:
        """(names, the text field of each, the steps among them)."""
        names: list[str] = []
        fields: list[str] = []
        steps: tuple = ()
        for k, item in enumerate(self.against):
            if isinstance(item, TextDataset):
                found_names, found = self._inputs(list(item.paths), f"against[{k}].paths")
                key = item.text_field
            else:
                found_names, found = self._inputs(item, f"against[{k}]")
                key = self.against_key
            names += found_names
            fields += [key] * len(found_names)
            steps += found
        if not names:
            raise StepDefinitionError(
                f"decontaminate {self.name!r}: against is empty; give the evaluation data to remove"
            )
        return tuple(names), tuple(fields), steps

    def transform(self) -> DecontaminateSpec:
        if self.ngram < 1:
            raise StepDefinitionError(
                f"decontaminate {self.name!r}: ngram must be a positive int, got {self.ngram!r}"
            )
        names, fields, _ = self._parsed_against
        return DecontaminateSpec(
            self.ngram,
            names,
            self.against_key,
            self.text_key,
            self.bad_records,
            against_fields=fields if any(f != self.against_key for f in fields) else (),
        )

    def input_steps(self) -> tuple:
        return super().input_steps() + self._parsed_against[2]


@dataclass(frozen=True)
class DedupStep(InputStep):
    """What both dedups take: the field compared (`key`) and the shuffle's width (`num_shards`,
    not in the key: it never changes the output)."""

    method: ClassVar[str]
    run = staticmethod(run_dedup_step)
    _: KW_ONLY
    key: str = "text"
    num_shards: int | None = None

    def method_options(self) -> dict[str, Any]:
        return {}

    @functools.cached_property
    def config(self) -> DedupConfig:
        return DedupConfig(
            self.method,
            self._parsed_input[0],
            key=self.key,
            bad_records=self.bad_records,
            num_shards=self.num_shards,
            zephyr=self.zephyr,
            rejected=bool(self.rejected),
            allow_empty=self.allow_empty,
            **self.method_options(),
        )


@dataclass(frozen=True)
class DedupExactStep(DedupStep):
    """Keep the first document (in input order) of each normalized `key` value."""

    helper: ClassVar[str] = "dedup_exact"
    method: ClassVar[str] = "exact"


@dataclass(frozen=True)
class DedupFuzzyStep(DedupStep):
    """MinHash-LSH near-duplicate removal: one document (the earliest) per connected component of pairs
    whose estimated word-`ngram` Jaccard is >= threshold. `bands=None` picks bands for recall."""

    helper: ClassVar[str] = "dedup_fuzzy"
    method: ClassVar[str] = "fuzzy"
    _: KW_ONLY
    threshold: float = 0.8
    num_perm: int = 128
    ngram: int = 5
    bands: int | None = None
    seed: int = 1

    def method_options(self) -> dict[str, Any]:
        what = f"dedup_fuzzy {self.name!r}"
        if not 0 < self.threshold <= 1:
            raise StepDefinitionError(f"{what}: threshold must be in (0, 1], got {self.threshold!r}")
        if self.num_perm < 2 or self.ngram < 1:
            raise StepDefinitionError(f"{what}: num_perm must be >= 2 and ngram >= 1")
        if self.bands is not None and not 1 <= self.bands <= self.num_perm:
            raise StepDefinitionError(f"{what}: bands must be an int in [1, num_perm], got {self.bands!r}")
        return {
            "threshold": float(self.threshold),
            "num_perm": self.num_perm,
            "ngram": self.ngram,
            "bands": self.bands,
            "seed": self.seed,
        }


@dataclass(frozen=True)
class MixStep(CurationStep):
    """A deterministic weighted sample of `total_documents` documents from the inputs (keys of `weights`)."""

    helper: ClassVar[str] = "mix"
    run = staticmethod(run_mix_step)
    weights: Mapping[Any, float]
    _: KW_ONLY
    total_documents: int
    seed: int = 0
    text_key: str = "text"

    def __post_init__(self) -> None:
        weights = self.weights
        if not isinstance(weights, Mapping) or not weights:
            raise StepDefinitionError(
                f"mix {self.name!r}: weights must be a non-empty {{input: weight}} mapping"
            )
        for k, weight in enumerate(weights.values()):
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight <= 0:
                raise StepDefinitionError(
                    f"mix {self.name!r}: weights[{k}] must be a positive number, got {weight!r}"
                )
        if self.total_documents < 1:
            raise StepDefinitionError(
                f"mix {self.name!r}: total_documents must be a positive int, got {self.total_documents!r}"
            )
        object.__setattr__(self, "weights", weights if isinstance(weights, Mixture) else Mixture(weights))
        super().__post_init__()

    @functools.cached_property
    def _parsed(self) -> tuple[tuple[tuple[str, float], ...], tuple]:
        pairs, steps = [], []
        for k, (source, weight) in enumerate(self.weights.items()):
            names, found = self._inputs(source, f"weights[{k}]")
            if len(names) != 1:
                raise StepDefinitionError(f"mix {self.name!r}: each key of weights is one input")
            pairs.append((names[0], float(weight)))
            steps += found
        return tuple(pairs), tuple(steps)

    @functools.cached_property
    def config(self) -> MixConfig:
        return MixConfig(
            self._parsed[0],
            self.total_documents,
            self.seed,
            self.text_key,
            self.bad_records,
            self.zephyr,
            allow_empty=self.allow_empty,
        )

    def input_steps(self) -> tuple:
        return self._parsed[1]


@dataclass(frozen=True)
class TrainQualityClassifierStep(CurationStep):
    """Train a fastText classifier of `positive` against `negative` documents (each an input as
    curation steps take: paths, globs, `marin://` corpora, steps or handles, or a list of those,
    records with a `text_key` field); writes `model.bin` (fastText's format) and `report.json`
    (held-out AUC and accuracy with intervals, score histograms per class). Deterministic for
    `params.seed` (fastText trains on one thread)."""

    helper: ClassVar[str] = "train_quality_classifier"
    run = staticmethod(run_train_classifier)
    _: KW_ONLY
    positive: Any
    negative: Any
    params: FastTextParams = FastTextParams()
    max_documents: int | None = None
    heldout_fraction: float = 0.1
    text_key: str = "text"

    def __post_init__(self) -> None:
        for arg in ("positive", "negative"):
            if isinstance(getattr(self, arg), list):
                object.__setattr__(self, arg, tuple(getattr(self, arg)))
        super().__post_init__()

    @functools.cached_property
    def _parsed(self) -> tuple[tuple[str, ...], tuple[str, ...], tuple]:
        positive, pos_steps = self._inputs(self.positive, "positive")
        negative, neg_steps = self._inputs(self.negative, "negative")
        return positive, negative, pos_steps + neg_steps

    @functools.cached_property
    def config(self) -> ClassifierConfig:
        what = f"train_quality_classifier {self.name!r}"
        if not 0 < self.heldout_fraction < 1:
            raise StepDefinitionError(
                f"{what}: heldout_fraction must be in (0, 1), got {self.heldout_fraction!r}"
            )
        if self.max_documents is not None and self.max_documents < 2:
            raise StepDefinitionError(f"{what}: max_documents must be at least 2, got {self.max_documents!r}")
        positive, negative, _ = self._parsed
        if set(positive) == set(negative):
            raise StepDefinitionError(
                f"{what}: positive and negative are the same documents ({', '.join(positive)}); "
                "give the classifier two different sets to tell apart"
            )
        return ClassifierConfig(
            positive,
            negative,
            self.params,
            self.max_documents,
            float(self.heldout_fraction),
            self.text_key,
            self.bad_records,
        )

    def input_steps(self) -> tuple:
        return self._parsed[2]


@dataclass(frozen=True)
class ScoreDocumentsStep(CurationStep):
    """Score every document of `input` with `classifier` and keep the scores as attribute shards
    aligned with the input's ids (the text is not copied), with a health report.

    `classifier`: a `train_quality_classifier` handle or StepSpec; a path to a fastText `.bin`
    (probability of `__label__hq`; pass `FastTextClassifier(path, positive_label=...)` for
    another label); a Hugging Face sequence-classification folder (`HFClassifier(path, label=...)`);
    or `LanguageScore("en")` / `RulesPass()` / `RandomScore(seed)` (py3langid's probability, the
    rules' verdict, a seeded random control)."""

    helper: ClassVar[str] = "score_documents"
    run = staticmethod(run_score_step)
    input: Any
    _: KW_ONLY
    classifier: Any
    attribute: str = "quality"
    text_key: str = "text"
    id_key: str = "id"
    source_key: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.input, list):
            object.__setattr__(self, "input", tuple(self.input))
        super().__post_init__()

    @functools.cached_property
    def _parsed(self) -> tuple[tuple[str, ...], Any, tuple]:
        names, steps = self._inputs(self.input, "input")
        classifier = self.classifier
        if isinstance(classifier, (StepSpec, LazyStep)):
            return names, FastTextClassifier(STEP_PREFIX + lower(classifier).name), steps + (classifier,)
        if isinstance(classifier, (str, os.PathLike)):
            path = os.fspath(classifier)
            if "://" not in path:
                path = os.path.abspath(os.path.expanduser(path))
            spec = FastTextClassifier(path) if path.endswith(".bin") else HFClassifier(path)
            return names, spec, steps
        if isinstance(classifier, SCORERS):
            return names, classifier, steps
        raise StepDefinitionError(
            f"score_documents {self.name!r}: classifier must be a train_quality_classifier handle, a path to a "
            f"fastText .bin or a Hugging Face model folder, or a scorer (FastTextClassifier, HFClassifier, "
            f"LanguageScore, RulesPass, RandomScore), got {type(classifier).__name__} {classifier!r:.80}"
        )

    @functools.cached_property
    def config(self) -> ScoreConfig:
        if not self.attribute or not isinstance(self.attribute, str):
            raise StepDefinitionError(f"score_documents {self.name!r}: attribute must be a non-empty string")
        names, spec, _ = self._parsed
        return ScoreConfig(
            names,
            spec,
            self.attribute,
            self.text_key,
            self.id_key,
            self.source_key,
            self.bad_records,
            zephyr=self.zephyr,
            allow_empty=self.allow_empty,
        )

    def input_steps(self) -> tuple:
        return self._parsed[2]


@dataclass(frozen=True)
class FilterByScoreStep(InputStep):
    """Keep the documents of `input` in the top `keep_top` share of `scores` (a `score_documents`
    handle or an attribute folder) or scoring at least `threshold`, among those whose `also`
    attribute sets ({scores: minimum}) are at least their minimums. Reads attributes, never a model:
    changing the cut re-runs only this step."""

    helper: ClassVar[str] = "filter_by_score"
    run = staticmethod(run_filter_by_score)
    _: KW_ONLY
    scores: Any
    keep_top: float | None = None
    threshold: float | None = None
    attribute: str | None = None
    also: Mapping[Any, float] | None = None
    text_key: str = "text"
    id_key: str = "id"

    def __post_init__(self) -> None:
        if isinstance(self.also, Mapping) and not isinstance(self.also, Mixture):
            object.__setattr__(self, "also", Mixture(self.also))
        super().__post_init__()

    @functools.cached_property
    def _parsed_scores(self) -> tuple[ScoreSet, tuple[ScoreSet, ...], tuple]:
        what = f"filter_by_score {self.name!r}"
        names, steps = self._inputs(self.scores, "scores")
        if len(names) != 1:
            raise StepDefinitionError(f"{what}: scores is one score_documents step or attribute folder")
        also: list[ScoreSet] = []
        for k, (scores, minimum) in enumerate((self.also or {}).items()):
            if isinstance(minimum, bool) or not isinstance(minimum, (int, float)):
                raise StepDefinitionError(
                    f"{what}: also[{k}] must map scores to a minimum number, got {minimum!r}"
                )
            found, more = self._inputs(scores, f"also[{k}]")
            also += [ScoreSet(n, None, float(minimum)) for n in found]
            steps += more
        return ScoreSet(names[0], self.attribute), tuple(also), steps

    @functools.cached_property
    def config(self) -> CutConfig:
        what = f"filter_by_score {self.name!r}"
        if (self.keep_top is None) == (self.threshold is None):
            raise StepDefinitionError(f"{what}: give exactly one of keep_top= and threshold=")
        if self.keep_top is not None and not (
            isinstance(self.keep_top, (int, float))
            and not isinstance(self.keep_top, bool)
            and 0 < self.keep_top <= 1
        ):
            raise StepDefinitionError(
                f"{what}: keep_top is the share of documents kept and must be in (0, 1], got {self.keep_top!r}"
            )
        ranked, also, _ = self._parsed_scores
        return CutConfig(
            self._parsed_input[0],
            ranked,
            None if self.keep_top is None else float(self.keep_top),
            None if self.threshold is None else float(self.threshold),
            also,
            self.text_key,
            self.id_key,
            self.bad_records,
            bool(self.rejected),
            zephyr=self.zephyr,
            allow_empty=self.allow_empty,
        )

    def input_steps(self) -> tuple:
        return super().input_steps() + self._parsed_scores[2]


extract_text = ExtractTextStep
filter_language = FilterLanguageStep
filter_quality = FilterQualityStep
decontaminate = DecontaminateStep
dedup_exact = DedupExactStep
dedup_fuzzy = DedupFuzzyStep
mix = MixStep
train_quality_classifier = TrainQualityClassifierStep
score_documents = ScoreDocumentsStep
filter_by_score = FilterByScoreStep


def _inputs(name: str, value: Any, arg: str) -> tuple[tuple[str, ...], tuple]:
    """Input names (paths, corpus names, `step:NAME`) and the steps among them."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if not items:
        raise StepDefinitionError(f"step {name!r}: {arg} is empty; give a path, a glob, a step or a handle")
    names, steps = [], []
    for k, item in enumerate(items):
        where = arg if len(items) == 1 and not isinstance(value, (list, tuple)) else f"{arg}[{k}]"
        if isinstance(item, os.PathLike):
            item = os.fspath(item)
        if isinstance(item, str):
            if not item:
                raise StepDefinitionError(f"step {name!r}: {where} is an empty string")
            try:
                check_input(item, f"step {name!r}: {where}")
            except CurationError as e:
                raise StepDefinitionError(str(e)) from None
            local = item.startswith(("/", "./", "../", "~")) or "://" not in item
            names.append(
                os.path.abspath(os.path.expanduser(item))
                if local and not item.startswith("marin://")
                else item
            )
        elif isinstance(item, (StepSpec, LazyStep)):
            steps.append(item)
            names.append(STEP_PREFIX + lower(item).name)
        else:
            raise StepDefinitionError(
                f"step {name!r}: {where} must be a path or glob, a StepSpec or a step handle, "
                f"got {type(item).__name__} {item!r:.80}"
            )
    return tuple(names), tuple(steps)
