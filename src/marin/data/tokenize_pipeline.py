"""The tokenize step: read documents, encode them in batches, write a token cache, as a zephyr pipeline.

Each planned input shard becomes one output shard per split. A worker encodes with the Rust
`tokenizers` library in batches (very long documents are cut at whitespace into pieces that are
encoded separately and rejoined), appends EOS, routes each document to train or validation by a
hash of its text, and streams the ids into the shard files. When both splits of an input shard
are published it writes `shards/part-NNNNN.json`; a rerun skips every shard that has one, so a
killed run resumes where it stopped, and the bytes never depend on the backend or on timing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, islice
from typing import Any

import numpy as np
import orjson
import xxhash

import storage
from marin.data.file_documents import ShardStats
from marin.data.sources import PlannedShard
from marin.data.token_cache import (
    BOS_POLICY,
    EOS_POLICY,
    FORMAT,
    FORMAT_VERSION,
    SPLITS,
    TOKENIZER_DIR,
    TRAIN,
    VALIDATION,
    shard_name,
)
from marin.data.token_cache_writer import ShardSummary, ShardWriter

logger = logging.getLogger("marin.data.tokenize")

SHARD_RECORDS_DIR = "shards"
DEFAULT_BATCH_SIZE = 512
DEFAULT_MAX_CHUNK_CHARS = 50_000


@dataclass(frozen=True)
class EncodeSettings:
    """What every worker needs to encode and write shards: picklable, the same for every shard."""

    output_path: str
    dtype: str
    eos_id: int
    validation_fraction: float
    bad_records: str
    batch_size: int = DEFAULT_BATCH_SIZE
    max_chunk_chars: int = DEFAULT_MAX_CHUNK_CHARS

    @property
    def tokenizer_file(self) -> str:
        return storage.join(self.output_path, TOKENIZER_DIR, "tokenizer.json")


@dataclass(frozen=True)
class ShardOutcome:
    """One input shard's result: its per-split counts and its skipped bad records."""

    index: int
    splits: dict[str, dict[str, int]]
    bad_records: int
    bad_examples: tuple[str, ...]
    resumed: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "splits": self.splits,
            "bad_records": self.bad_records,
            "bad_examples": list(self.bad_examples),
        }


_tokenizers: dict[tuple[str, bytes], Any] = {}


def _load_tokenizer(path: str):
    """The Rust tokenizer from a tokenizer.json, loaded once per process and content."""
    from tokenizers import Tokenizer

    data = storage.read_bytes(path)
    if data is None:
        raise FileNotFoundError(f"tokenizer file {path} is missing")
    key = (path, xxhash.xxh3_128_digest(data))
    tok = _tokenizers.get(key)
    if tok is None:
        tok = _tokenizers[key] = Tokenizer.from_str(data.decode("utf-8"))
    return tok


def split_long_text(text: str, max_chars: int) -> list[str]:
    """Cut `text` into pieces of at most ~max_chars that concatenate back to it, preferring whitespace.

    A cut goes just before a whitespace character, where byte-level pre-tokenizers start a new word
    anyway; a piece with no whitespace in its second half is cut at max_chars.
    """
    pieces, start, n = [], 0, len(text)
    while n - start > max_chars:
        end = start + max_chars
        cut = max(text.rfind(" ", start + max_chars // 2, end), text.rfind("\n", start + max_chars // 2, end))
        if cut <= start:
            cut = end
        pieces.append(text[start:cut])
        start = cut
    pieces.append(text[start:])
    return pieces


def encode_documents(tok: Any, texts: list[str], eos_id: int, max_chunk_chars: int) -> list[list[int]]:
    """The token ids of each text, each ending with `eos_id`; long texts are encoded in pieces."""
    encode = getattr(tok, "encode_batch_fast", tok.encode_batch)
    if all(len(t) <= max_chunk_chars for t in texts):
        out = [e.ids for e in encode(texts, add_special_tokens=False)]
    else:
        pieces: list[str] = []
        counts: list[int] = []
        for t in texts:
            parts = split_long_text(t, max_chunk_chars) if len(t) > max_chunk_chars else [t]
            pieces.extend(parts)
            counts.append(len(parts))
        encoded = iter(encode(pieces, add_special_tokens=False))
        out = [list(chain.from_iterable(e.ids for e in islice(encoded, c))) for c in counts]
    for ids in out:
        ids.append(eos_id)
    return out


def is_validation(text_bytes: bytes, fraction: float) -> bool:
    """Whether a document belongs to the validation split: a hash of its bytes, so duplicates agree."""
    return fraction > 0 and xxhash.xxh3_64_intdigest(text_bytes) < fraction * 2.0**64


def _batched(texts: Iterable[str], size: int) -> Iterator[list[str]]:
    it = iter(texts)
    while batch := list(islice(it, size)):
        yield batch


def _record_path(root: str, index: int) -> str:
    return storage.join(root, SHARD_RECORDS_DIR, shard_name(index) + ".json")


def tokenize_shard(settings: EncodeSettings, planned: PlannedShard, index: int) -> ShardOutcome:
    """Encode one input shard into output shard `index` of every split, unless a past run finished it."""
    root = settings.output_path
    record = storage.read_bytes(_record_path(root, index))
    if record is not None:
        saved = orjson.loads(record)
        return ShardOutcome(
            index, saved["splits"], saved["bad_records"], tuple(saved["bad_examples"]), resumed=True
        )
    tok = _load_tokenizer(settings.tokenizer_file)
    stats = ShardStats()
    writers = {split: ShardWriter(root, split, index, np.dtype(settings.dtype)) for split in SPLITS}
    started = time.perf_counter()
    try:
        for texts in _batched(planned.texts(settings.bad_records, stats), settings.batch_size):
            ids = encode_documents(tok, texts, settings.eos_id, settings.max_chunk_chars)
            routed: dict[str, tuple[list, list, list]] = {split: ([], [], []) for split in SPLITS}
            for text, doc_ids in zip(texts, ids, strict=True):
                raw = text.encode("utf-8")
                toks, lens, nbytes = routed[
                    VALIDATION if is_validation(raw, settings.validation_fraction) else TRAIN
                ]
                toks.append(doc_ids)
                lens.append(len(doc_ids))
                nbytes.append(len(raw))
            for split, (toks, lens, nbytes) in routed.items():
                if lens:
                    flat = np.fromiter(chain.from_iterable(toks), dtype=settings.dtype, count=sum(lens))
                    writers[split].add(flat, np.asarray(lens, np.int64), np.asarray(nbytes, np.int64))
    except BaseException:
        for w in writers.values():
            w.abort()
        raise
    summaries: dict[str, ShardSummary] = {split: w.publish() for split, w in writers.items()}
    outcome = ShardOutcome(
        index,
        {split: s.to_json() for split, s in summaries.items()},
        stats.bad_records,
        tuple(stats.bad_examples),
    )
    storage.makedirs(storage.join(root, SHARD_RECORDS_DIR))
    storage.write_atomic(
        _record_path(root, index), orjson.dumps(outcome.to_json(), option=orjson.OPT_SORT_KEYS)
    )
    elapsed = time.perf_counter() - started
    tokens = sum(s.tokens for s in summaries.values())
    logger.info(
        "tokenized %s -> shard %d: %d documents, %d tokens in %.1fs (%.0f tokens/s)",
        planned.shard.describe(),
        index,
        sum(s.documents for s in summaries.values()),
        tokens,
        elapsed,
        tokens / elapsed if elapsed > 0 else 0.0,
    )
    return outcome


def tokenize_task_shard(
    settings: EncodeSettings, tasks: Iterator[tuple[int, PlannedShard]], shard_info: Any
) -> Iterator[dict]:
    """The zephyr `map_shard` function: encode each (index, planned shard) task; yield one summary each."""
    for index, planned in tasks:
        outcome = tokenize_shard(settings, planned, index)
        yield outcome.to_json() | {"resumed": outcome.resumed}


def build_ledger(
    outcomes: list[dict[str, Any]],
    *,
    dtype: str,
    tokenizer: dict[str, Any],
    source: dict[str, Any],
    sample_count: int | None,
    validation_fraction: float,
    bad_records_policy: str,
) -> dict[str, Any]:
    """The ledger.json of a finished cache, from the shards' outcomes in index order."""
    outcomes = sorted(outcomes, key=lambda o: o["index"])
    if [o["index"] for o in outcomes] != list(range(len(outcomes))):
        raise RuntimeError(
            f"tokenize produced shards {[o['index'] for o in outcomes]}, expected 0..{len(outcomes) - 1}"
        )
    splits = {}
    for split in SPLITS:
        shards = [o["splits"][split] for o in outcomes]
        splits[split] = {
            "documents": sum(s["documents"] for s in shards),
            "tokens": sum(s["tokens"] for s in shards),
            "bytes": sum(s["bytes"] for s in shards),
            "shards": shards,
        }
    examples = [e for o in outcomes for e in o["bad_examples"]][:5]
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "dtype": dtype,
        **tokenizer,
        "eos_policy": EOS_POLICY,
        "bos_policy": BOS_POLICY,
        "source": source,
        "sample_count": sample_count,
        "validation_fraction": validation_fraction,
        "bad_records_policy": bad_records_policy,
        "bad_records": sum(o["bad_records"] for o in outcomes),
        "bad_examples": examples,
        "splits": splits,
    }
