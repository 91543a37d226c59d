"""The body of a `tokenized()` step: tokenizer into place, plan the shards, run zephyr, write the ledger.

`run_tokenize(config, output_path)` is what the StepRunner calls (through functools.partial), in
whatever process runs the step. Everything it reads is named by the frozen `TokenizeConfig`, plus
the tokenizer step's output when the tokenizer is a dependency (found via the step context).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

import storage
from marin.data.sources import SourceConfig, SourceError
from marin.data.token_cache import BOS_POLICY, EOS_POLICY, FORMAT_VERSION, TOKENIZER_DIR, token_dtype
from marin.data.token_cache_writer import write_ledger
from marin.data.tokenize_pipeline import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_CHUNK_CHARS,
    EncodeSettings,
    build_ledger,
    tokenize_task_shard,
)
from marin.data.tokenizer import describe_tokenizer, materialize_tokenizer
from marin.execution.keyed import NOT_KEY, key_as

if TYPE_CHECKING:
    from zephyr import ZephyrConfig

logger = logging.getLogger("marin.data.tokenize")

DEFAULT_VALIDATION_FRACTION = 0.05


@dataclass(frozen=True)
class TokenizerStep:
    """The tokenizer a dependency step made: its output folder, found through the step context at run time."""

    name: str


def _tokenizer_key(tokenizer: str | TokenizerStep | None) -> dict[str, str | None]:
    """The tokenizer's part of the key: the step by name (its own key is a dependency's), or the spec."""
    return {"step": tokenizer.name} if isinstance(tokenizer, TokenizerStep) else {"spec": tokenizer}


@dataclass(frozen=True, kw_only=True)
class TokenizeOptions:
    """How a source is tokenized, besides the tokenizer: what `tokenized()` takes beyond its source.

    `validation_fraction` is the share of documents (chosen by a hash of their text) put in the
    "validation" split. Documents longer than `max_chunk_chars` are encoded in whitespace-cut
    pieces. `zephyr` (backend, workers; None: ZephyrConfig.from_env()) never changes the output
    bytes, so it is not in the key. A source that yields no document is an error naming it, unless
    `allow_empty=True` (which changes no byte either: it only lets an empty cache succeed).
    """

    validation_fraction: float = DEFAULT_VALIDATION_FRACTION
    max_chunk_chars: int = DEFAULT_MAX_CHUNK_CHARS
    zephyr: ZephyrConfig | None = field(default=None, metadata=NOT_KEY)
    allow_empty: bool = field(default=False, metadata=NOT_KEY)


@dataclass(frozen=True)
class TokenizeConfig(TokenizeOptions):
    """Everything a tokenize step reads; its key is every field but the execution-only ones.

    `tokenizer` is a hub id or folder, or the `TokenizerStep` (a dependency) that trained it.
    `batch_size` (documents per encode call) never changes the output bytes, so it is not part of
    the step's cache key. `format_version` and the EOS / BOS policies are what the writer does:
    fixed, and keyed so that a change to them changes the key.
    """

    # keyed even at their defaults: these keys were published before defaults stayed out (marin.execution.keyed)
    KEYED_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("tokenizer", "validation_fraction", "max_chunk_chars")

    input: SourceConfig
    tokenizer: str | TokenizerStep | None = field(default=None, metadata=key_as(_tokenizer_key))
    batch_size: int = field(default=DEFAULT_BATCH_SIZE, metadata=NOT_KEY)
    format_version: int = field(default=FORMAT_VERSION, init=False)
    eos_policy: str = field(default=EOS_POLICY, init=False)
    bos_policy: str = field(default=BOS_POLICY, init=False)


def resolve_tokenizer_source(config: TokenizeConfig) -> str:
    """The folder or hub id to take the tokenizer from; a dependency's output when it is a step."""
    if isinstance(config.tokenizer, TokenizerStep):
        from marin.execution.context import current

        return current().path_of(config.tokenizer.name)
    assert config.tokenizer is not None
    return config.tokenizer


def run_tokenize(config: TokenizeConfig, output_path: str) -> dict[str, Any]:
    """Tokenize the configured source into a token cache at `output_path`; returns its summary."""
    from zephyr import Dataset, ZephyrConfig

    started = time.perf_counter()
    tokenizer_dir = storage.join(output_path, TOKENIZER_DIR)
    materialize_tokenizer(resolve_tokenizer_source(config), tokenizer_dir)
    info = describe_tokenizer(tokenizer_dir)
    dtype = token_dtype(info.vocab_size).str

    planned = config.input.plan()
    settings = EncodeSettings(
        output_path=output_path,
        dtype=dtype,
        eos_id=info.eos_id,
        validation_fraction=config.validation_fraction,
        bad_records=config.input.bad_records,
        batch_size=config.batch_size,
        max_chunk_chars=config.max_chunk_chars,
    )
    zconfig = config.zephyr or ZephyrConfig.from_env()
    tasks = list(enumerate(planned))
    if len(tasks) == 1 and zconfig.backend == "processes":
        zconfig = zconfig.with_overrides(backend="sync")  # one shard: a worker process would only add startup
    logger.info(
        "tokenizing %d shard(s) of %s with %s", len(tasks), config.input.source or "files", zconfig.backend
    )
    outcomes = (
        Dataset.from_list(tasks, num_shards=max(1, len(tasks)))
        .map_shard(partial(tokenize_task_shard, settings))
        .collect(config=zconfig)
    )
    ledger = build_ledger(
        list(outcomes),
        dtype=dtype,
        tokenizer={
            "vocab_size": info.vocab_size,
            "eos_id": info.eos_id,
            "bos_id": info.bos_id,
            "eos_token": info.eos_token,
            "bos_token": info.bos_token,
            "tokenizer_fingerprint": info.fingerprint,
            "tokenizer": f"step:{config.tokenizer.name}"
            if isinstance(config.tokenizer, TokenizerStep)
            else config.tokenizer,
        },
        source=config.input.provenance(),
        sample_count=config.input.sample_count,
        validation_fraction=config.validation_fraction,
        bad_records_policy=config.input.bad_records,
    )
    if not config.allow_empty and not any(e["documents"] for e in ledger["splits"].values()):
        skipped = f" ({ledger['bad_records']} malformed records skipped)" if ledger["bad_records"] else ""
        raise SourceError(
            f"the source yielded 0 documents{skipped}: {config.input.where()}; check the paths and "
            f"text_key={config.input.text_key!r}, or pass allow_empty=True to accept an empty cache"
        )
    write_ledger(output_path, ledger)
    resumed = sum(1 for o in outcomes if o.get("resumed"))
    summary = {
        "headline": {
            "metric": "tokens",
            "value": sum(e["tokens"] for e in ledger["splits"].values()),
            "n": sum(e["documents"] for e in ledger["splits"].values()),  # the documents they come from
        },
        "documents": {s: e["documents"] for s, e in ledger["splits"].items()},
        "tokens": {s: e["tokens"] for s, e in ledger["splits"].items()},
        "bad_records": ledger["bad_records"],
        "tokenizer_fingerprint": info.fingerprint,
        "vocab_size": info.vocab_size,
        "shards": len(tasks),
        "shards_resumed": resumed,
        "seconds": round(time.perf_counter() - started, 3),
    }
    logger.info("token cache written to %s: %s", output_path, summary)
    return summary
