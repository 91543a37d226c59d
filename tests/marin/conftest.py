"""Fixtures shared by the data and post-training tests."""

from __future__ import annotations

import pytest

from marin.data.corpus import stories
from marin.data.tokenizer_training import train_byte_level_bpe


@pytest.fixture(scope="session")
def chat_tokenizer_dir(tmp_path_factory) -> str:
    """A byte-level BPE (at most 512 ids) trained on 300 stories, with the built-in "llama3" chat template."""
    path = str(tmp_path_factory.mktemp("chat-tokenizer"))
    train_byte_level_bpe(stories(0, 300), vocab_size=512, dest=path, chat_template="llama3")
    return path
