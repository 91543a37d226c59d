"""Data steps as lazy handles: `tokenized()` and `train_tokenizer()`.

Calling them reads nothing and downloads nothing: they are frozen dataclasses over their configs
(as `train_lm` is over `TrainConfig`) whose `to_step_spec()` (called by
`marin.execution.lazy.lower`) builds the StepSpec. Their parameters are declared once: the source
fields in `marin.data.sources.SourceFields`, the tokenize options in
`marin.data.tokenize_step.TokenizeOptions`, the tokenizer-training ones in
`marin.data.train_tokenizer_step.TrainTokenizerOptions`, and name, version, adopt and resources in
`marin.execution.lazy.StepOptions`. The step's `hash_attrs` are its config's key fields
(`marin.execution.keyed.hash_attrs_of`): every field of `TokenizeConfig` / `TrainTokenizerConfig`
except those marked execution-only (the zephyr backend and worker count, the encode batch size,
`allow_empty`), which never change the bytes written. A tokenizer given as a handle or StepSpec
becomes a dependency, so its cache key is part of this step's key.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass
from functools import partial
from typing import ClassVar

from marin.data.sources import EMBEDDED_SOURCE, SourceConfig, SourceFields
from marin.data.step_inputs import declared_inputs, run_with_step_inputs, split_step_inputs
from marin.data.tokenize_step import TokenizeConfig, TokenizeOptions, TokenizerStep, run_tokenize
from marin.data.train_tokenizer_step import TrainTokenizerConfig, TrainTokenizerOptions, run_train_tokenizer
from marin.execution.errors import MarinError, StepDefinitionError
from marin.execution.keyed import hash_attrs_of
from marin.execution.lazy import LazyStep, StepOptions, lower
from marin.execution.step_spec import StepSpec

__all__ = ["EMBEDDED_SOURCE", "TokenizedData", "TrainedTokenizer", "tokenized", "train_tokenizer"]

SourceArg = str | os.PathLike | StepSpec | LazyStep | None
PathsArg = Sequence[str | os.PathLike | StepSpec | LazyStep] | os.PathLike | StepSpec | LazyStep | None


def _normalize_location(spec: str) -> str:
    """Make a local path absolute (steps may run in another process); leave hub ids and URLs alone.

    Only paths that look local (/, ./, ../, ~) count: "org/name" is a hub id (e.g. "roneneldan/TinyStories").
    """
    if spec.startswith(("/", "./", "../", "~")) or spec in (".", ".."):
        return os.path.abspath(os.path.expanduser(spec))
    return spec


@dataclass(frozen=True)
class _SourceStep(SourceFields, StepOptions):
    """What both data handles share: a source given as a name, files, steps or handles.

    `source=` or items of `paths=` may be steps or handles (curation steps, ...): each becomes a
    dependency whose output's .jsonl(.gz|.zst) / .parquet files are read.
    """

    _: KW_ONLY
    source: SourceArg = None
    paths: PathsArg = None

    def __post_init__(self) -> None:
        if not self.name:
            raise StepDefinitionError(f"{self.helper}: the step name must be a non-empty string")
        paths = self.paths
        if isinstance(paths, os.PathLike) or isinstance(paths, (StepSpec, LazyStep)):
            paths = (paths,)
        if paths is not None and not isinstance(paths, str):
            paths = tuple(
                _normalize_location(os.fspath(p)) if isinstance(p, (str, os.PathLike)) else p for p in paths
            )
        object.__setattr__(self, "paths", paths)
        source = self.source
        if isinstance(source, os.PathLike):
            source = os.fspath(source)
        if isinstance(source, str) and source != EMBEDDED_SOURCE:
            source = _normalize_location(source)
        object.__setattr__(self, "source", source)
        self.source_config  # noqa: B018 - check the source now, at declaration, not when it runs

    @functools.cached_property
    def _split(self) -> tuple[str | None, tuple[str, ...] | None, tuple]:
        """(source, paths, steps): steps and handles replaced by `step:NAME` placeholders."""
        return split_step_inputs(self.name, self.source, self.paths)

    @functools.cached_property
    def source_config(self) -> SourceConfig:
        """The source as the step reads it (steps as `step:NAME` placeholders, resolved at run time)."""
        source, paths, _ = self._split
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(SourceFields)}
        config = SourceConfig(**(fields | {"source": source, "paths": paths}))
        try:
            config.check()
        except MarinError as e:
            raise StepDefinitionError(f"{self.helper} {self.name!r}: {e}") from None
        return config

    def _source_deps(self) -> tuple[StepSpec, ...]:
        return tuple(lower(s) for s in self._split[2])


@dataclass(frozen=True)
class TrainedTokenizer(TrainTokenizerOptions, _SourceStep):
    """Declare a step that trains a byte-level BPE of at most `vocab_size` ids on a source.

    `train_tokenizer` is this class: `name`, then by keyword the source (`source=` or `paths=`, and
    the other `SourceFields`), `vocab_size` and `min_frequency` (`TrainTokenizerOptions`) and the
    `StepOptions`. Pass the handle as `tokenized(tokenizer=...)`; it becomes that step's
    dependency. Its output folder is a tokenizer AutoTokenizer loads. `adopt=True` takes an existing
    folder at the step's output path as the tokenizer without training.
    """

    helper: ClassVar[str] = "train_tokenizer"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.vocab_size < 259:
            raise StepDefinitionError(
                f"train_tokenizer {self.name!r}: vocab_size must be an int >= 259 (256 bytes + 3 special "
                f"tokens), got {self.vocab_size!r}"
            )

    @functools.cached_property
    def config(self) -> TrainTokenizerConfig:
        """What the step's function reads."""
        options = {f.name: getattr(self, f.name) for f in dataclasses.fields(TrainTokenizerOptions)}
        return TrainTokenizerConfig(input=self.source_config, **options)

    def to_step_spec(self) -> StepSpec:
        return StepSpec(
            fn=partial(run_with_step_inputs, run_train_tokenizer, self.config),
            deps=self._source_deps(),
            hash_attrs=hash_attrs_of(self.config),
            inputs=declared_inputs(self.config.input),
            **self.spec_options(),
        )


train_tokenizer = TrainedTokenizer

TokenizerArg = str | TrainedTokenizer | StepSpec | LazyStep


@dataclass(frozen=True)
class TokenizedData(TokenizeOptions, _SourceStep):
    """Declare a step that tokenizes a source into a token cache. Nothing is read until it runs.

    `tokenized` is this class: `name`, then by keyword `tokenizer`, the source and the options:

    tokenizer: a hub id or tokenizer folder, or a `train_tokenizer()` handle / StepSpec (a dependency).
    source: a Hugging Face dataset id (streamed; `split` and `hf_config` pick the split and config),
        a local HF dataset folder, or "marin://tinystories-synth" (the embedded story corpus).
    paths: instead of `source`, local or fsspec files / globs: .jsonl/.json (.gz, .zst), .parquet, .txt.
        They are the step's declared inputs: each file's name, size and digest are part of the key, so
        appending to, adding or removing a file reruns the step (a local dataset folder given as
        `source=` is declared the same way).
        `source=` or any item of `paths=` may also be a StepSpec or a step handle (a curation step, ...):
        it becomes a dependency, and its output's .jsonl(.gz|.zst) / .parquet files are read.
    revision: pins a hub dataset `source=` to a commit, tag or branch; it is part of the key. An
        unpinned hub source is marked `unpinned: ORG/NAME` in the plan (its changes cannot be seen).
    sample_count: exactly the first N documents (train + validation) in the source's order.
    text_key, bad_records, split, hf_config: see `marin.data.sources.SourceFields`.
    validation_fraction, max_chunk_chars, zephyr, allow_empty: see `marin.data.tokenize_step.TokenizeOptions`
        (a source that yields no document fails the step, naming it, unless allow_empty=True).
    version, adopt, resources: see `marin.execution.lazy.StepOptions` (adopt takes an existing token
        cache at the step's output path without tokenizing).
    Its output folder is a token cache (`marin.data.token_cache`).
    """

    helper: ClassVar[str] = "tokenized"
    _: KW_ONLY
    tokenizer: TokenizerArg

    def __post_init__(self) -> None:
        super().__post_init__()
        name, fraction, tokenizer = self.name, self.validation_fraction, self.tokenizer
        if not 0.0 <= fraction < 1.0:
            raise StepDefinitionError(
                f"tokenized {name!r}: validation_fraction must be in [0, 1), got {fraction!r}"
            )
        if isinstance(tokenizer, str):
            if not tokenizer:
                raise StepDefinitionError(f"tokenized {name!r}: tokenizer is an empty string")
            object.__setattr__(self, "tokenizer", _normalize_location(tokenizer))
        if self.max_chunk_chars < 1_000:
            raise StepDefinitionError(
                f"tokenized {name!r}: max_chunk_chars must be an int >= 1000, got {self.max_chunk_chars!r}"
            )

    @functools.cached_property
    def config(self) -> TokenizeConfig:
        """What the step's function reads (a tokenizer step enters as `TokenizerStep` when lowered)."""
        options = {f.name: getattr(self, f.name) for f in dataclasses.fields(TokenizeOptions)}
        tokenizer = self.tokenizer if isinstance(self.tokenizer, str) else None
        return TokenizeConfig(input=self.source_config, tokenizer=tokenizer, **options)

    def to_step_spec(self) -> StepSpec:
        deps: tuple[StepSpec, ...] = ()
        config = self.config
        if not isinstance(self.tokenizer, str):
            dep = lower(self.tokenizer)
            deps = (dep,)
            config = dataclasses.replace(config, tokenizer=TokenizerStep(dep.name))
        return StepSpec(
            fn=partial(run_with_step_inputs, run_tokenize, config),
            deps=deps + tuple(d for d in self._source_deps() if d not in deps),
            hash_attrs=hash_attrs_of(config),  # a tokenizer step's own key enters through deps
            resumable=True,  # shards are published atomically; a rerun keeps the finished ones
            inputs=declared_inputs(config.input) + _tokenizer_files(self.tokenizer),
            **self.spec_options(),
        )


tokenized = TokenizedData


def _tokenizer_files(tokenizer: TokenizerArg) -> tuple[str, ...]:
    """A tokenizer folder's files (a local or fsspec path), declared as inputs: replacing them reruns
    the step. A hub id is named by the key only, and a tokenizer step enters through its own key."""
    if not isinstance(tokenizer, str) or not (os.path.isabs(tokenizer) or "://" in tokenizer):
        return ()
    return (tokenizer.rstrip("/") + "/*",)
