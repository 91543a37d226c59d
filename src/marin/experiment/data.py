"""Data steps as lazy handles: `tokenized()` and `train_tokenizer()`.

Calling them reads nothing and downloads nothing: they return hashable frozen handles whose
`to_step_spec()` (called by `marin.execution.lazy.lower`) builds the StepSpec. The step's
`hash_attrs` are its config's key fields (`marin.execution.keyed.hash_attrs_of`): every field of
`TokenizeConfig` / `TrainTokenizerConfig` except those marked execution-only (the zephyr backend
and worker count, the encode batch size), which never change the bytes written. A tokenizer given as
a handle or StepSpec becomes a dependency, so its cache key is part of this step's key.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from marin.data.sources import EMBEDDED_SOURCE, SourceConfig
from marin.data.step_inputs import (
    STEP_INPUT_PREFIX,
    declared_inputs,
    run_with_step_inputs,
    split_step_inputs,
)
from marin.data.tokenize_pipeline import DEFAULT_MAX_CHUNK_CHARS
from marin.data.tokenize_step import TokenizeConfig, TokenizerStep, run_tokenize
from marin.data.tokenizer_training import TokenizerTrainingError, chat_template_and_tokens
from marin.data.train_tokenizer_step import TrainTokenizerConfig, run_train_tokenizer
from marin.execution.errors import MarinError, StepDefinitionError
from marin.execution.keyed import hash_attrs_of
from marin.execution.lazy import LazyStep, lower
from marin.execution.step_spec import StepSpec

if TYPE_CHECKING:
    from zephyr import ZephyrConfig

__all__ = ["EMBEDDED_SOURCE", "TokenizedData", "TrainedTokenizer", "tokenized", "train_tokenizer"]

DEFAULT_VALIDATION_FRACTION = 0.05


def _normalize_location(spec: str) -> str:
    """Make a local path absolute (steps may run in another process); leave hub ids and URLs alone.

    Only paths that look local (/, ./, ../, ~) count: "org/name" is a hub id (e.g. "roneneldan/TinyStories").
    """
    if spec.startswith(("/", "./", "../", "~")) or spec in (".", ".."):
        return os.path.abspath(os.path.expanduser(spec))
    return spec


def _source_config(
    name: str, source, paths, text_key, split, hf_config, sample_count, bad_records, revision
) -> SourceConfig:
    if not isinstance(name, str) or not name:
        raise StepDefinitionError(f"data step name must be a non-empty string, got {name!r}")
    if paths is not None and not isinstance(paths, str):
        paths = tuple(p if p.startswith(STEP_INPUT_PREFIX) else _normalize_location(p) for p in paths)
    if isinstance(source, str) and source != EMBEDDED_SOURCE:
        source = _normalize_location(source)
    config = SourceConfig(source, paths, text_key, split, hf_config, sample_count, bad_records, revision)
    try:
        config.check()
    except MarinError as e:
        raise StepDefinitionError(f"step {name!r}: {e}") from None
    return config


@dataclass(frozen=True)
class TrainedTokenizer:
    """A lazy `train_tokenizer()` step: its output folder is a tokenizer AutoTokenizer loads."""

    name: str
    config: TrainTokenizerConfig
    version: str | None = None
    adopt: bool = False  # take an existing tokenizer folder at the output path (see StepSpec.adopt)
    source_steps: tuple = ()  # steps / handles named by step: placeholders in config.input.paths

    def to_step_spec(self) -> StepSpec:
        return StepSpec(
            name=self.name,
            fn=partial(run_with_step_inputs, run_train_tokenizer, self.config),
            deps=tuple(lower(s) for s in self.source_steps),
            hash_attrs=hash_attrs_of(self.config),
            version=self.version,
            inputs=declared_inputs(self.config.input),
            adopt=self.adopt,
        )


def train_tokenizer(
    name: str,
    *,
    vocab_size: int,
    source: Any = None,
    paths: Sequence[Any] | None = None,
    sample_count: int | None = None,
    text_key: str = "text",
    split: str = "train",
    hf_config: str | None = None,
    min_frequency: int = 2,
    bad_records: str = "fail",
    version: str | None = None,
    revision: str | None = None,
    adopt: bool = False,
    chat_template: str | None = None,
) -> TrainedTokenizer:
    """Declare a step that trains a byte-level BPE of at most `vocab_size` ids on a source.

    The vocabulary comes out smaller when the text has fewer merges than asked for. Pass the
    handle as `tokenized(tokenizer=...)`; it becomes that step's dependency. `paths=` and
    `revision=` work as in `tokenized()`; `source=` or items of `paths=` may be steps or handles
    (e.g. curation steps): each becomes a dependency whose output files are read. `adopt=True`
    takes an existing folder at the step's output path as the tokenizer without training (see
    StepSpec.adopt). `chat_template` gives the tokenizer a chat template: "llama3" (Llama 3's turn
    format, its three special tokens reserved in the vocabulary) or a Jinja template of your own; the
    exports of models trained with it then chat through `transformers` (see docs/post_training.md).
    """
    source, paths, source_steps = split_step_inputs(name, source, paths)
    source_config = _source_config(
        name, source, paths, text_key, split, hf_config, sample_count, bad_records, revision
    )
    try:
        _, chat_tokens = chat_template_and_tokens(chat_template)
    except TokenizerTrainingError as e:
        raise StepDefinitionError(f"step {name!r}: {e}") from None
    smallest = 259 + len(chat_tokens)
    if not isinstance(vocab_size, int) or vocab_size < smallest:
        raise StepDefinitionError(
            f"step {name!r}: vocab_size must be an int >= {smallest} (256 bytes + {smallest - 256} special "
            f"tokens), got {vocab_size!r}"
        )
    config = TrainTokenizerConfig(source_config, vocab_size, min_frequency, chat_template)
    return TrainedTokenizer(name, config, version, adopt, source_steps)


TokenizerArg = str | TrainedTokenizer | StepSpec | LazyStep


@dataclass(frozen=True)
class TokenizedData:
    """A lazy `tokenized()` step: its output folder is a token cache (`marin.data.token_cache`)."""

    name: str
    tokenizer: TokenizerArg
    config: TokenizeConfig
    version: str | None = None
    adopt: bool = False  # take an existing token cache at the output path (see StepSpec.adopt)
    source_steps: tuple = ()  # steps / handles named by step: placeholders in config.input.paths

    def to_step_spec(self) -> StepSpec:
        deps: tuple[StepSpec, ...] = ()
        input_deps = tuple(lower(s) for s in self.source_steps)
        config = self.config
        if not isinstance(self.tokenizer, str):
            dep = lower(self.tokenizer)
            deps = (dep,)
            config = dataclasses.replace(config, tokenizer=TokenizerStep(dep.name))
        return StepSpec(
            name=self.name,
            fn=partial(run_with_step_inputs, run_tokenize, config),
            deps=deps + tuple(d for d in input_deps if d not in deps),
            hash_attrs=hash_attrs_of(config),  # a tokenizer step's own key enters through deps
            version=self.version,
            resumable=True,  # shards are published atomically; a rerun keeps the finished ones
            inputs=declared_inputs(config.input),
            adopt=self.adopt,
        )


def tokenized(
    name: str,
    *,
    tokenizer: TokenizerArg,
    source: Any = None,
    paths: Sequence[Any] | None = None,
    sample_count: int | None = None,
    text_key: str = "text",
    split: str = "train",
    hf_config: str | None = None,
    validation_fraction: float = DEFAULT_VALIDATION_FRACTION,
    bad_records: str = "fail",
    max_chunk_chars: int = DEFAULT_MAX_CHUNK_CHARS,
    version: str | None = None,
    zephyr: ZephyrConfig | None = None,
    revision: str | None = None,
    adopt: bool = False,
) -> TokenizedData:
    """Declare a step that tokenizes a source into a token cache. Nothing is read until it runs.

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
    tokenizer: a hub id or tokenizer folder, or a `train_tokenizer()` handle / StepSpec (a dependency).
    sample_count: exactly the first N documents (train + validation) in the source's order.
    validation_fraction: the share of documents (chosen by a hash of their text) put in "validation".
    bad_records: "fail" (an error naming file:line) or "skip" (skip and count malformed records).
    max_chunk_chars: documents longer than this are encoded in whitespace-cut pieces.
    zephyr: a `zephyr.ZephyrConfig` for backend / workers (default: ZephyrConfig.from_env()).
    adopt: take an existing token cache at the step's output path without tokenizing (see StepSpec.adopt).
    """
    source, paths, source_steps = split_step_inputs(name, source, paths)
    source_config = _source_config(
        name, source, paths, text_key, split, hf_config, sample_count, bad_records, revision
    )
    if (
        isinstance(validation_fraction, bool)
        or not isinstance(validation_fraction, (int, float))
        or not 0.0 <= validation_fraction < 1.0
    ):
        raise StepDefinitionError(
            f"step {name!r}: validation_fraction must be in [0, 1), got {validation_fraction!r}"
        )
    if isinstance(tokenizer, str) and tokenizer:
        tokenizer = _normalize_location(tokenizer)
    elif not isinstance(tokenizer, (StepSpec, LazyStep)):
        raise StepDefinitionError(
            f"step {name!r}: tokenizer must be a hub id, a tokenizer folder, or a train_tokenizer() handle, "
            f"got {tokenizer!r}"
        )
    if not isinstance(max_chunk_chars, int) or max_chunk_chars < 1_000:
        raise StepDefinitionError(
            f"step {name!r}: max_chunk_chars must be an int >= 1000, got {max_chunk_chars!r}"
        )
    config = TokenizeConfig(
        input=source_config,
        tokenizer=tokenizer if isinstance(tokenizer, str) else None,
        validation_fraction=float(validation_fraction),
        max_chunk_chars=max_chunk_chars,
        zephyr=zephyr,
    )
    return TokenizedData(name, tokenizer, config, version, adopt, source_steps)
