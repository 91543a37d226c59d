"""Curation steps as lazy handles: extract_text, filter_language, filter_quality, dedup_exact,
dedup_fuzzy, decontaminate and mix.

Like `tokenized()`, each call reads nothing and returns a hashable frozen handle; `to_step_spec()`
builds the StepSpec. An `input` is a path or glob, `marin://web-synth`, a StepSpec or a handle (a
dependency whose output files are read), or a list of those; the files and globs are the step's
declared inputs (their digests are in its key). Every parameter that changes the output (rules and
thresholds, languages, MinHash settings) is in the key; the zephyr backend and worker count are
not. Each step writes `part-*.jsonl.zst` shards and `stats.json`; with `rejected=True` (all but
`mix`) also each dropped document with the rule that dropped it, under `_rejected/`. `adopt=True`
takes an existing folder at the output path as the output (see StepSpec.adopt).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from marin.curation.dedup import DedupConfig, run_dedup_step
from marin.curation.documents import STEP_PREFIX, CurationError, check_input, declared_files
from marin.curation.extract import ExtractText
from marin.curation.filters import DecontaminateSpec, FilterLanguage, FilterQuality
from marin.curation.mix import MixConfig, run_mix_step
from marin.curation.rules import make_rules
from marin.curation.steps import DocumentStepConfig, run_document_step
from marin.evaluation.documents import TextDataset
from marin.execution.errors import StepDefinitionError
from marin.execution.keyed import hash_attrs_of
from marin.execution.lazy import LazyStep, lower
from marin.execution.step_spec import StepSpec
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
    "filter_quality",
    "mix",
]

DEFAULT_QUALITY_RULES = ("gopher_quality", "gopher_repetition", "c4", "fineweb")


@dataclass(frozen=True)
class CurationStep:
    """A lazy curation step: `fn(config, output_path)` with `config` a frozen dataclass; `steps` are its inputs.

    The files and globs it reads are its declared `inputs` (each file's name, size and digest in the
    key, so appending to a raw input reruns it, naming the file in the plan); `adopt` takes an
    existing folder at the output path instead of running (see StepSpec.adopt).
    """

    name: str
    fn: Callable[[Any, str], dict]
    config: DocumentStepConfig | DedupConfig | MixConfig  # keyed by marin.execution.keyed.hash_attrs_of
    steps: tuple = ()
    version: str | None = None
    adopt: bool = False

    def to_step_spec(self) -> StepSpec:
        return StepSpec(
            name=self.name,
            fn=partial(self.fn, self.config),
            deps=tuple(lower(s) for s in self.steps),
            hash_attrs=hash_attrs_of(self.config),
            version=self.version,
            inputs=declared_files(self.config.input_names()),
            adopt=self.adopt,
        )


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


def _check_common(name: str, bad_records: str) -> None:
    if not isinstance(name, str) or not name:
        raise StepDefinitionError(f"curation step name must be a non-empty string, got {name!r}")
    if bad_records not in BAD_RECORD_POLICIES:
        raise StepDefinitionError(
            f"step {name!r}: bad_records={bad_records!r}; choose one of {BAD_RECORD_POLICIES}"
        )


def _document_step(
    name: str,
    input: Any,
    kind: str,
    transform: Any,
    bad_records: str,
    version: str | None,
    zephyr: ZephyrConfig | None,
    rejected: bool = False,
    adopt: bool = False,
) -> CurationStep:
    _check_common(name, bad_records)
    inputs, steps = _inputs(name, input, "input")
    return CurationStep(
        name,
        run_document_step,
        DocumentStepConfig(kind, inputs, transform, bad_records, zephyr, rejected=bool(rejected)),
        steps,
        version,
        adopt,
    )


def extract_text(
    name: str,
    input: Any,
    *,
    format: str = "html",
    html_key: str = "html",
    bad_records: str = "fail",
    version: str | None = None,
    zephyr: ZephyrConfig | None = None,
    rejected: bool = False,
    adopt: bool = False,
) -> CurationStep:
    """Extract the main text of web pages with resiliparse (menus, footers, banners removed).

    format="html": JSON records whose `html_key` holds the page (e.g. marin://web-synth);
    format="warc": .warc(.gz) files, one document per HTTP response. Output records hold "text".
    """
    if format not in ("html", "warc"):
        raise StepDefinitionError(f"step {name!r}: format must be 'html' or 'warc', got {format!r}")
    return _document_step(
        name,
        input,
        "extract_text",
        ExtractText(html_key, format=format),
        bad_records,
        version,
        zephyr,
        rejected,
        adopt,
    )


def filter_language(
    name: str,
    input: Any,
    *,
    languages: Sequence[str] = ("en",),
    min_score: float = 0.65,
    text_key: str = "text",
    bad_records: str = "fail",
    version: str | None = None,
    zephyr: ZephyrConfig | None = None,
    rejected: bool = False,
    adopt: bool = False,
) -> CurationStep:
    """Keep documents whose language (py3langid, bundled model) is in `languages` with probability >= min_score."""
    if isinstance(languages, str) or not languages or not all(isinstance(x, str) for x in languages):
        raise StepDefinitionError(
            f"step {name!r}: languages must be a list of ISO 639-1 codes, got {languages!r}"
        )
    if not isinstance(min_score, (int, float)) or not 0 <= min_score <= 1:
        raise StepDefinitionError(f"step {name!r}: min_score must be in [0, 1], got {min_score!r}")
    transform = FilterLanguage(tuple(languages), float(min_score), text_key)
    return _document_step(
        name, input, "filter_language", transform, bad_records, version, zephyr, rejected, adopt
    )


def filter_quality(
    name: str,
    input: Any,
    *,
    rules: Sequence[Any] = DEFAULT_QUALITY_RULES,
    text_key: str = "text",
    bad_records: str = "fail",
    version: str | None = None,
    zephyr: ZephyrConfig | None = None,
    rejected: bool = False,
    adopt: bool = False,
) -> CurationStep:
    """Apply quality rules in order (names take the published thresholds, or pass e.g.
    `GopherQuality(min_doc_words=100)`).
    """
    try:
        made = make_rules(tuple(rules))
    except ValueError as e:
        raise StepDefinitionError(f"step {name!r}: {e}") from None
    return _document_step(
        name,
        input,
        "filter_quality",
        FilterQuality(made, text_key),
        bad_records,
        version,
        zephyr,
        rejected,
        adopt,
    )


def decontaminate(
    name: str,
    input: Any,
    *,
    against: Sequence[Any],
    ngram: int = 13,
    text_key: str = "text",
    against_key: str = "text",
    bad_records: str = "fail",
    version: str | None = None,
    zephyr: ZephyrConfig | None = None,
    rejected: bool = False,
    adopt: bool = False,
) -> CurationStep:
    """Drop documents sharing any word `ngram`-gram with the evaluation data in `against`: paths or
    globs, steps or handles, `TextDataset`s (their paths, read at their `text_field`) or
    `marin://tinystories-synth` (optionally `?start=A&stop=B`, e.g. the stories an evaluation reads)."""
    if not isinstance(ngram, int) or ngram < 1:
        raise StepDefinitionError(f"step {name!r}: ngram must be a positive int, got {ngram!r}")
    if isinstance(against, (str, os.PathLike, TextDataset)) or not isinstance(against, Sequence):
        against = [against]
    against_names: list[str] = []
    fields: list[str] = []
    against_steps: tuple = ()
    for k, item in enumerate(against):
        if isinstance(item, TextDataset):
            names, found = _inputs(name, list(item.paths), f"against[{k}].paths")
            key = item.text_field
        else:
            names, found = _inputs(name, item, f"against[{k}]")
            key = against_key
        against_names += names
        fields += [key] * len(names)
        against_steps += found
    if not against_names:
        raise StepDefinitionError(f"step {name!r}: against is empty; give the evaluation data to remove")
    step = _document_step(
        name,
        input,
        "decontaminate",
        DecontaminateSpec(
            ngram,
            tuple(against_names),
            against_key,
            text_key,
            bad_records,
            against_fields=tuple(fields) if any(f != against_key for f in fields) else (),
        ),
        bad_records,
        version,
        zephyr,
        rejected,
        adopt,
    )
    return CurationStep(step.name, step.fn, step.config, step.steps + against_steps, version, adopt)


def dedup_exact(
    name: str,
    input: Any,
    *,
    key: str = "text",
    bad_records: str = "fail",
    num_shards: int | None = None,
    version: str | None = None,
    zephyr: ZephyrConfig | None = None,
    rejected: bool = False,
    adopt: bool = False,
) -> CurationStep:
    """Keep the first document (in input order) of each normalized `key` value."""
    _check_common(name, bad_records)
    inputs, steps = _inputs(name, input, "input")
    config = DedupConfig(
        "exact",
        inputs,
        key=key,
        bad_records=bad_records,
        num_shards=num_shards,
        zephyr=zephyr,
        rejected=bool(rejected),
    )
    return CurationStep(name, run_dedup_step, config, steps, version, adopt)


def dedup_fuzzy(
    name: str,
    input: Any,
    *,
    threshold: float = 0.8,
    num_perm: int = 128,
    ngram: int = 5,
    bands: int | None = None,
    key: str = "text",
    seed: int = 1,
    bad_records: str = "fail",
    num_shards: int | None = None,
    version: str | None = None,
    zephyr: ZephyrConfig | None = None,
    rejected: bool = False,
    adopt: bool = False,
) -> CurationStep:
    """MinHash-LSH near-duplicate removal: one document (the earliest) per connected component of pairs
    whose estimated word-`ngram` Jaccard is >= threshold. `bands=None` picks bands for recall."""
    _check_common(name, bad_records)
    if not 0 < threshold <= 1:
        raise StepDefinitionError(f"step {name!r}: threshold must be in (0, 1], got {threshold!r}")
    if not isinstance(num_perm, int) or num_perm < 2 or not isinstance(ngram, int) or ngram < 1:
        raise StepDefinitionError(f"step {name!r}: num_perm >= 2 and ngram >= 1 must be ints")
    if bands is not None and (not isinstance(bands, int) or not 1 <= bands <= num_perm):
        raise StepDefinitionError(f"step {name!r}: bands must be an int in [1, num_perm], got {bands!r}")
    inputs, steps = _inputs(name, input, "input")
    config = DedupConfig(
        "fuzzy",
        inputs,
        key=key,
        threshold=float(threshold),
        num_perm=num_perm,
        ngram=ngram,
        bands=bands,
        seed=seed,
        bad_records=bad_records,
        num_shards=num_shards,
        zephyr=zephyr,
        rejected=bool(rejected),
    )
    return CurationStep(name, run_dedup_step, config, steps, version, adopt)


def mix(
    name: str,
    weights: Mapping[Any, float],
    *,
    total_documents: int,
    seed: int = 0,
    text_key: str = "text",
    bad_records: str = "fail",
    version: str | None = None,
    zephyr: ZephyrConfig | None = None,
    adopt: bool = False,
) -> CurationStep:
    """A deterministic weighted sample of `total_documents` documents from the inputs (keys of `weights`)."""
    _check_common(name, bad_records)
    if not isinstance(weights, Mapping) or not weights:
        raise StepDefinitionError(f"step {name!r}: weights must be a non-empty {{input: weight}} mapping")
    if not isinstance(total_documents, int) or total_documents < 1:
        raise StepDefinitionError(
            f"step {name!r}: total_documents must be a positive int, got {total_documents!r}"
        )
    pairs, steps = [], []
    for k, (source, weight) in enumerate(weights.items()):
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight <= 0:
            raise StepDefinitionError(
                f"step {name!r}: weights[{k}] must be a positive number, got {weight!r}"
            )
        names, found = _inputs(name, source, f"weights[{k}]")
        if len(names) != 1:
            raise StepDefinitionError(f"step {name!r}: each key of weights is one input")
        pairs.append((names[0], float(weight)))
        steps += found
    config = MixConfig(tuple(pairs), total_documents, seed, text_key, bad_records, zephyr)
    return CurationStep(name, run_mix_step, config, tuple(steps), version, adopt)
