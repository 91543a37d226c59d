"""Real token caches for the trainer's tests: a BPE tokenizer trained on the embedded corpus, and caches
written with the token cache writer."""

from __future__ import annotations

import os

import numpy as np
import pytest

from marin.data.corpus import stories
from marin.data.token_cache import FORMAT, FORMAT_VERSION, TOKENIZER_DIR, token_dtype
from marin.data.token_cache_writer import ShardWriter, write_ledger
from marin.data.tokenizer import copy_local_tree, describe_tokenizer
from marin.data.tokenizer_training import train_byte_level_bpe

VOCAB = 384


@pytest.fixture(scope="session")
def bpe_tokenizer(tmp_path_factory) -> str:
    """A byte-level BPE trained on 300 stories of the embedded corpus."""
    folder = str(tmp_path_factory.mktemp("tokenizer"))
    train_byte_level_bpe(stories(0, 300), VOCAB, folder)
    return folder


def write_cache(root: str, tokenizer_dir: str, splits: dict[str, list[str]]) -> str:
    """Tokenize `splits` (name -> texts) with the tokenizer and write a token cache at `root`."""
    from tokenizers import Tokenizer

    info = describe_tokenizer(tokenizer_dir)
    tok = Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json"))
    dtype = token_dtype(info.vocab_size)
    ledger_splits = {}
    for split, texts in splits.items():
        writer = ShardWriter(root, split, 0, dtype)
        docs = [tok.encode(t).ids + [info.eos_id] for t in texts]
        if docs:
            writer.add(
                np.concatenate([np.asarray(d, dtype=np.int64) for d in docs]),
                np.array([len(d) for d in docs]),
                np.array([len(t.encode()) for t in texts]),
            )
        summary = writer.publish()
        ledger_splits[split] = {**summary.to_json(), "shards": [summary.to_json()]}
    copy_local_tree(tokenizer_dir, os.path.join(root, TOKENIZER_DIR))
    write_ledger(
        root,
        {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "dtype": dtype.str,
            "vocab_size": info.vocab_size,
            "eos_id": info.eos_id,
            "bos_id": info.bos_id,
            "tokenizer_fingerprint": info.fingerprint,
            "splits": ledger_splits,
        },
    )
    return root


@pytest.fixture(scope="session")
def story_cache(tmp_path_factory, bpe_tokenizer) -> str:
    """A cache of 400 training and 40 validation stories."""
    root = str(tmp_path_factory.mktemp("cache-stories"))
    return write_cache(root, bpe_tokenizer, {"train": list(stories(0, 400)), "validation": list(stories(400, 440))})


@pytest.fixture(scope="session")
def other_cache(tmp_path_factory, bpe_tokenizer) -> str:
    """A second, different cache (later stories, another seed) for mixtures."""
    root = str(tmp_path_factory.mktemp("cache-other"))
    return write_cache(root, bpe_tokenizer, {"train": list(stories(0, 200, seed=7)), "validation": list(stories(200, 220, seed=7))})
