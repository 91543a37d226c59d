"""Open the token caches a run trains on and check them before any step runs."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from marin.training.errors import TrainingDataError
from marin.training.loader import TokenSource

TRAIN_SPLIT = "train"
VALIDATION_SPLIT = "validation"


@dataclass(frozen=True)
class DatasetInput:
    """One entry of a run's mixture: a token cache at `path`, its `name` (for messages) and `weight`."""

    name: str
    path: str
    weight: float


@dataclass(frozen=True)
class OpenedDataset:
    """A token cache opened for training: its splits and tokenizer facts."""

    input: DatasetInput
    train: TokenSource
    validation: TokenSource | None
    vocab_size: int
    eos_id: int | None
    tokenizer_path: str | None


def open_dataset(entry: DatasetInput) -> OpenedDataset:
    """Open `entry`'s token cache; an empty train split is a TrainingDataError naming the cache."""
    from marin.data.token_cache import TokenCache

    cache = TokenCache.open(entry.path)
    train = cache.split(TRAIN_SPLIT)
    if train.num_tokens == 0:
        raise TrainingDataError(
            f"dataset {entry.name!r}: the token cache at {entry.path} has no tokens in its {TRAIN_SPLIT!r} "
            "split; check the tokenize step's source and sample_count"
        )
    validation = cache.split(VALIDATION_SPLIT) if VALIDATION_SPLIT in cache.split_names else None
    if validation is not None and validation.num_tokens < 2:
        validation = None
    return OpenedDataset(
        input=entry,
        train=train,
        validation=validation,
        vocab_size=int(cache.vocab_size),
        eos_id=cache.eos_id,
        tokenizer_path=cache.tokenizer_path,
    )


def check_vocab(datasets: list[OpenedDataset], model_vocab_size: int) -> None:
    """Every cache's tokenizer must fit the model's embedding table."""
    for ds in datasets:
        if ds.vocab_size > model_vocab_size:
            raise TrainingDataError(
                f"dataset {ds.input.name!r}: its tokenizer has {ds.vocab_size} tokens but the model's embedding "
                f"has {model_vocab_size} rows; set the model config's vocab_size ≥ {ds.vocab_size} or leave it None "
                "to take the tokenizer's size"
            )


def unigram_entropy(sources: list[TokenSource], vocab_size: int, max_tokens: int = 20_000_000) -> float:
    """Entropy in nats of the token frequencies over (up to `max_tokens` of each of) `sources`.

    A model that ignores context cannot beat it on those tokens, so a trained loss well below it
    shows the model learned from context.
    """
    counts = np.zeros(vocab_size, dtype=np.int64)
    for source in sources:
        stop = min(source.num_tokens, max_tokens)
        for start in range(0, stop, 1 << 22):
            chunk = source.tokens(start, min(stop, start + (1 << 22)))
            counts += np.bincount(chunk, minlength=vocab_size)[:vocab_size]
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum()) if math.isfinite(p.sum()) and p.size else 0.0
