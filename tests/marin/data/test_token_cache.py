"""Token cache format: dtype choice, atomic shard publication, O(1) random access locally and remotely."""

from __future__ import annotations

import os

import numpy as np
import pytest

from marin.data.token_cache import TokenCache, TokenCacheError, token_dtype
from marin.data.token_cache_writer import ShardWriter, write_ledger
from marin.data.tokenize_pipeline import build_ledger


def test_dtype_is_uint16_below_65536_ids_else_uint32():
    assert token_dtype(4096) == np.dtype("<u2")
    assert token_dtype(65_535) == np.dtype("<u2")
    assert token_dtype(65_536) == np.dtype("<u4")
    assert token_dtype(128_256) == np.dtype("<u4")


def _write_cache(root: str, docs_per_shard: list[list[list[int]]], vocab_size: int) -> list[list[int]]:
    """Write one train shard per entry (possibly empty) and an empty validation split; return all docs."""
    dtype = token_dtype(vocab_size)
    outcomes = []
    for index, docs in enumerate(docs_per_shard):
        summaries = {}
        for split, split_docs in (("train", docs), ("validation", [])):
            w = ShardWriter(root, split, index, dtype)
            if split_docs:
                flat = np.concatenate([np.asarray(d) for d in split_docs])
                w.add(
                    flat, np.array([len(d) for d in split_docs]), np.array([10 * len(d) for d in split_docs])
                )
            summaries[split] = w.publish().to_json()
        outcomes.append({"index": index, "splits": summaries, "bad_records": 0, "bad_examples": []})
    tokenizer = {
        "vocab_size": vocab_size,
        "eos_id": 0,
        "bos_id": None,
        "tokenizer_fingerprint": "sha256:test",
    }
    ledger = build_ledger(
        outcomes,
        dtype=dtype.str,
        tokenizer=tokenizer,
        source={"kind": "test"},
        sample_count=None,
        validation_fraction=0.0,
        bad_records_policy="fail",
    )
    write_ledger(root, ledger)
    return [d for docs in docs_per_shard for d in docs]


def _random_docs(rng: np.random.Generator, n: int, vocab: int) -> list[list[int]]:
    return [list(rng.integers(1, vocab, size=rng.integers(1, 40))) + [0] for _ in range(n)]


@pytest.mark.parametrize("vocab_size", [1000, 100_000])
def test_reader_returns_every_document_and_window_across_shards(tmp_path, vocab_size):
    rng = np.random.default_rng(0)
    shards = [
        _random_docs(rng, 7, vocab_size),
        [],
        _random_docs(rng, 1, vocab_size),
        [],
        _random_docs(rng, 12, vocab_size),
    ]
    docs = _write_cache(str(tmp_path), shards, vocab_size)
    cache = TokenCache.open(str(tmp_path))
    train = cache.split("train")
    assert cache.vocab_size == vocab_size and cache.eos_id == 0
    assert cache.dtype == token_dtype(vocab_size)
    assert cache.tokenizer_path == f"{tmp_path}/tokenizer"
    assert train.num_documents == len(docs) == len(train)
    flat = np.concatenate([np.asarray(d) for d in docs])
    assert train.num_tokens == len(flat)
    assert train.num_bytes == 10 * len(flat)
    for i, doc in enumerate(docs):
        assert train.document(i).tolist() == doc
        assert train.document_bytes(i) == 10 * len(doc)
    for start, stop in [(0, 0), (0, 5), (3, len(flat)), (len(flat) - 1, len(flat)), (5, 200)]:
        stop = min(stop, len(flat))
        assert train.tokens(start, stop).tolist() == flat[start:stop].tolist()
    assert train.document_offsets()[-1] == len(flat)
    assert cache.split("validation").num_documents == 0


def test_out_of_range_access_names_the_split(tmp_path):
    _write_cache(str(tmp_path), [[[1, 2, 0]]], 100)
    train = TokenCache.open(str(tmp_path)).split("train")
    with pytest.raises(TokenCacheError, match="train"):
        train.document(1)
    with pytest.raises(TokenCacheError, match="token range"):
        train.tokens(2, 4)
    with pytest.raises(TokenCacheError, match="no split 'test'"):
        TokenCache.open(str(tmp_path)).split("test")


def test_missing_ledger_is_a_clear_error(tmp_path):
    with pytest.raises(TokenCacheError, match="no finished token cache"):
        TokenCache.open(str(tmp_path))


def test_unpublished_shard_leaves_only_temporary_files_which_the_next_writer_removes(tmp_path):
    w = ShardWriter(str(tmp_path), "train", 0, np.dtype("<u2"))
    w.add(np.array([1, 2, 0]), np.array([3]), np.array([5]))
    names = os.listdir(tmp_path / "train")
    assert names and all(".tmp-" in n for n in names)
    w2 = ShardWriter(str(tmp_path), "train", 0, np.dtype("<u2"))  # a rerun after a crash
    w2.add(np.array([7, 0]), np.array([2]), np.array([1]))
    w2.publish()
    assert sorted(os.listdir(tmp_path / "train")) == [
        "part-00000.bytes",
        "part-00000.offsets",
        "part-00000.tokens",
    ]
    assert np.fromfile(tmp_path / "train" / "part-00000.offsets", "<i8").tolist() == [0, 2]
    w.abort()


def test_remote_cache_is_written_and_read_with_ranged_reads_through_fsspec():
    import fsspec

    root = "memory://marin-test-cache"
    rng = np.random.default_rng(1)
    docs = _write_cache(root, [_random_docs(rng, 5, 500), _random_docs(rng, 4, 500)], 500)
    fs = fsspec.filesystem("memory")
    assert fs.exists("/marin-test-cache/train/part-00001.tokens")
    train = TokenCache.open(root).split("train")
    assert [train.document(i).tolist() for i in range(len(docs))] == docs
    flat = [t for d in docs for t in d]
    assert train.tokens(3, len(flat) - 2).tolist() == flat[3:-2]
    fs.rm("/marin-test-cache", recursive=True)
