"""Tokenizers: training a byte-level BPE, loading it with transformers, fingerprints, offline errors."""

from __future__ import annotations

import os
import shutil

import pytest
from transformers import AutoTokenizer

from marin.data.corpus import stories
from marin.data.tokenizer import (
    TokenizerNotFoundError,
    describe_tokenizer,
    materialize_tokenizer,
)
from marin.data.tokenizer_training import EOS_TOKEN, TokenizerTrainingError, train_byte_level_bpe


def test_trained_tokenizer_loads_with_autotokenizer_and_round_trips(tiny_tokenizer_dir):
    tok = AutoTokenizer.from_pretrained(tiny_tokenizer_dir)
    assert tok.eos_token == EOS_TOKEN and tok.bos_token is not None
    for text in list(stories(5000, 5020)) + ["  two  spaces\tand\ttabs\n\nCafé 🙂 東京"]:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == text
    assert len(tok) <= 512


def test_training_is_deterministic_and_vocab_size_is_a_parameter(tmp_path):
    texts = list(stories(0, 400))
    train_byte_level_bpe(texts, 300, str(tmp_path / "a"))
    train_byte_level_bpe(texts, 300, str(tmp_path / "b"))
    train_byte_level_bpe(texts, 400, str(tmp_path / "c"))
    a, b, c = (describe_tokenizer(str(tmp_path / n)) for n in "abc")
    assert a.fingerprint == b.fingerprint != c.fingerprint
    assert a.vocab_size == 300 and c.vocab_size == 400


def test_too_small_vocabulary_is_refused(tmp_path):
    with pytest.raises(TokenizerTrainingError, match="at least 259"):
        train_byte_level_bpe(["some text"], 100, str(tmp_path))


def test_fingerprint_is_the_content_not_the_path(tiny_tokenizer_dir, tmp_path):
    copy = tmp_path / "elsewhere"
    shutil.copytree(tiny_tokenizer_dir, copy)
    assert describe_tokenizer(str(copy)).fingerprint == describe_tokenizer(tiny_tokenizer_dir).fingerprint


def test_materialize_copies_a_local_tokenizer_byte_for_byte(tiny_tokenizer_dir, tmp_path):
    dest = tmp_path / "out"
    materialize_tokenizer(tiny_tokenizer_dir, str(dest))
    for name in os.listdir(tiny_tokenizer_dir):
        assert (dest / name).read_bytes() == open(os.path.join(tiny_tokenizer_dir, name), "rb").read()
    assert AutoTokenizer.from_pretrained(str(dest)).eos_token == EOS_TOKEN


def test_unknown_tokenizer_offline_says_how_to_provide_it(tmp_path):
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    with pytest.raises(TokenizerNotFoundError) as err:
        materialize_tokenizer("no-such-org/no-such-tokenizer-xyz", str(tmp_path / "tok"))
    message = str(err.value)
    assert "no-such-org/no-such-tokenizer-xyz" in message
    assert "offline" in message and "save_pretrained" in message and "MARIN_TOKENIZER" in message
