"""The body of a `train_tokenizer()` step: train a byte-level BPE on a source, save it as the step's output."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from marin.data.file_documents import ShardStats
from marin.data.sources import SourceConfig, SourceError, iter_documents
from marin.data.tokenizer import describe_tokenizer
from marin.data.tokenizer_training import train_byte_level_bpe


@dataclass(frozen=True, kw_only=True)
class TrainTokenizerOptions:
    """What `train_tokenizer()` takes beyond its source: at most `vocab_size` ids (the vocabulary
    comes out smaller when the text has fewer merges), merges seen at least `min_frequency` times."""

    vocab_size: int
    min_frequency: int = 2


@dataclass(frozen=True)
class TrainTokenizerConfig(TrainTokenizerOptions):
    """What a tokenizer-training step reads and how big a vocabulary it trains (every field is keyed).

    `kind` is the algorithm: byte-level BPE, the only one there is.
    """

    # keyed even at their defaults: these keys were published before defaults stayed out (marin.execution.keyed)
    KEYED_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("min_frequency",)

    input: SourceConfig
    kind: str = field(default="byte_level_bpe", init=False)


def run_train_tokenizer(config: TrainTokenizerConfig, output_path: str) -> dict[str, Any]:
    """Train on the first `sample_count` documents (all when None); the output folder loads with AutoTokenizer."""
    stats = ShardStats()
    count = [0]

    def documents() -> Iterator[str]:
        for text in iter_documents(config.input.plan(), config.input.bad_records, stats):
            count[0] += 1
            yield text

    train_byte_level_bpe(documents(), config.vocab_size, output_path, config.min_frequency)
    if not count[0]:
        skipped = f" ({stats.bad_records} malformed records skipped)" if stats.bad_records else ""
        raise SourceError(
            f"the source yielded 0 documents to train a tokenizer on{skipped}: {config.input.where()}; "
            f"check the paths and text_key={config.input.text_key!r}"
        )
    info = describe_tokenizer(output_path)
    return {
        "headline": {"metric": "vocab_size", "value": info.vocab_size},
        "tokenizer_path": output_path,
        "vocab_size": info.vocab_size,
        "requested_vocab_size": config.vocab_size,
        "tokenizer_fingerprint": info.fingerprint,
        "eos_token": info.eos_token,
        "bad_records": stats.bad_records,
        "source": config.input.provenance(),
    }
