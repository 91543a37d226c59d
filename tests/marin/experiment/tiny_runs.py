"""The tiny pipeline the experiment tests train: a BPE on the embedded corpus, its token cache, and a
two-layer Llama trained on it for a few steps (their own keyword arguments on top)."""

from __future__ import annotations

from typing import Any


def tiny_data(vocab_size: int = 384, sample_count: int = 160, tokenizer_samples: int = 200):
    """(tokenizer handle, tokenized handle) over the embedded story corpus, 10% held out."""
    from marin.data.corpus import SOURCE_NAME
    from marin.experiment.data import tokenized, train_tokenizer
    from zephyr import ZephyrConfig

    tokenizer = train_tokenizer(
        name="tokenizers/bpe", source=SOURCE_NAME, vocab_size=vocab_size, sample_count=tokenizer_samples
    )
    data = tokenized(
        name="tokenized/stories",
        tokenizer=tokenizer,
        source=SOURCE_NAME,
        sample_count=sample_count,
        validation_fraction=0.1,
        zephyr=ZephyrConfig(backend="sync", quiet=True),
    )
    return tokenizer, data


def tiny_model(name: str, data, num_train_steps: int, seq_len: int = 64, **options: Any):
    """A train_lm handle of a two-layer, 32-wide Llama on `data` (batch 4, lr 3e-3, one CPU thread)."""
    from marin.experiment.train import train_lm
    from marin.training.models import LlamaConfig
    from marin.training.optim import AdamConfig

    return train_lm(
        name=name,
        model=LlamaConfig(hidden_dim=32, intermediate_dim=64, num_layers=2, num_heads=2, max_seq_len=seq_len),
        optimizer=AdamConfig(learning_rate=3e-3),
        datasets={data: 1.0},
        batch_size=4,
        seq_len=seq_len,
        num_train_steps=num_train_steps,
        cpu_threads=1,
        **options,
    )
