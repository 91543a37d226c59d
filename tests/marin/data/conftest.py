"""Fixtures for the data tests: a small BPE tokenizer trained once on the embedded corpus."""

from __future__ import annotations

import pytest

from marin.data.corpus import stories
from marin.data.tokenizer_training import train_byte_level_bpe


@pytest.fixture(scope="session")
def tiny_tokenizer_dir(tmp_path_factory) -> str:
    """A byte-level BPE (at most 512 ids) trained on 1,000 generated stories plus some non-ASCII text."""
    path = str(tmp_path_factory.mktemp("tokenizer"))
    texts = list(stories(0, 1000)) + ["Café naïve — 東京 🙂 ünïcödé"] * 3
    train_byte_level_bpe(texts, vocab_size=512, dest=path)
    return path
