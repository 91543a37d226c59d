"""The window mixture loader: deterministic, weighted, resumable, rank-sliced, prefetched."""

import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from marin.data.token_cache import TokenCache
from marin.training.errors import TrainingConfigError, TrainingDataError
from marin.training.loader import NamedSource, Prefetcher, WindowMixture


def _train(path):
    return TokenCache.open(path).split("train")


def _mixture(story_cache, other_cache, *, seed=0, weights=(3.0, 1.0), **kwargs):
    sources = [
        NamedSource("stories", _train(story_cache), weights[0]),
        NamedSource("other", _train(other_cache), weights[1]),
    ]
    return WindowMixture(
        sources,
        seq_len=kwargs.pop("seq_len", 64),
        batch_size=kwargs.pop("batch_size", 8),
        seed=seed,
        **kwargs,
    )


def test_same_seed_gives_the_same_batches_and_another_seed_does_not(story_cache, other_cache):
    a, b, c = (_mixture(story_cache, other_cache, seed=s) for s in (5, 5, 6))
    batches_a = [a.next_batch() for _ in range(4)]
    assert all(np.array_equal(x, b.next_batch()) for x in batches_a)
    assert not all(np.array_equal(x, c.next_batch()) for x in batches_a)
    assert batches_a[0].shape == (8, 65) and batches_a[0].dtype == np.int64


def test_samples_follow_the_mixture_weights(story_cache, other_cache):
    loader = _mixture(story_cache, other_cache, weights=(3.0, 1.0), batch_size=50)
    for _ in range(40):
        loader.next_batch()
    state = loader.state_dict()
    drawn = [
        e * n + c for e, n, c in zip(state["epochs"], loader._num_windows, state["cursors"], strict=False)
    ]
    assert sum(drawn) == state["samples"] == 2000
    assert drawn[0] / 2000 == pytest.approx(0.75, abs=0.03)


def test_one_epoch_reads_every_window_once_as_contiguous_tokens(story_cache):
    split = _train(story_cache)
    seq = 256
    loader = WindowMixture([NamedSource("stories", split, 1.0)], seq_len=seq, batch_size=1, seed=1)
    n = (split.num_tokens - 1) // seq
    starts = {split.tokens(w * seq, w * seq + seq + 1).tobytes(): w for w in range(n)}
    seen = [starts[loader.next_batch()[0].astype(split.tokens(0, 1).dtype).tobytes()] for _ in range(n)]
    assert sorted(seen) == list(range(n))
    assert loader.state_dict()["epochs"] == [1]


def test_restored_state_continues_with_the_same_batches(story_cache, other_cache):
    loader = _mixture(story_cache, other_cache, seed=2)
    for _ in range(7):
        loader.next_batch()
    state = loader.state_dict()
    expected = [loader.next_batch() for _ in range(5)]
    fresh = _mixture(story_cache, other_cache, seed=2)
    fresh.load_state_dict(state)
    assert all(np.array_equal(x, fresh.next_batch()) for x in expected)
    with pytest.raises(TrainingConfigError, match="seed"):
        _mixture(story_cache, other_cache, seed=3).load_state_dict(state)


def test_ranks_read_disjoint_slices_of_the_same_global_batch(story_cache, other_cache):
    whole = _mixture(story_cache, other_cache, batch_size=8)
    ranks = [_mixture(story_cache, other_cache, batch_size=8, rank=r, world_size=2) for r in range(2)]
    for _ in range(3):
        assert np.array_equal(whole.next_batch(), np.concatenate([r.next_batch() for r in ranks]))
    assert ranks[0].state_dict() == whole.state_dict()


def test_cache_shorter_than_a_window_and_bad_weights_are_refused(story_cache):
    split = _train(story_cache)
    with pytest.raises(TrainingDataError, match="seq_len"):
        WindowMixture([NamedSource("stories", split, 1.0)], seq_len=split.num_tokens, batch_size=1, seed=0)
    with pytest.raises(TrainingConfigError, match="weight"):
        WindowMixture([NamedSource("stories", split, 0.0)], seq_len=8, batch_size=1, seed=0)
    with pytest.raises(TrainingConfigError, match="multiple"):
        WindowMixture([NamedSource("stories", split, 1.0)], seq_len=8, batch_size=3, seed=0, world_size=2)


def test_prefetcher_yields_the_loader_batches_with_their_states_and_counts_its_waits(
    story_cache, other_cache
):
    reference = _mixture(story_cache, other_cache)
    prefetcher = Prefetcher(_mixture(story_cache, other_cache), torch.device("cpu"), depth=2)
    try:
        for _ in range(5):
            batch = prefetcher.next()
            rows = reference.next_batch()
            assert torch.equal(batch.inputs, torch.from_numpy(rows[:, :-1]))
            assert torch.equal(batch.targets, torch.from_numpy(rows[:, 1:]))
            assert batch.loader_state == reference.state_dict()
        assert prefetcher.wait_seconds >= prefetcher.last_wait_seconds >= 0.0
    finally:
        prefetcher.close()


def test_prefetcher_hands_a_loader_failure_to_the_train_loop(story_cache, tmp_path):
    copy = shutil.copytree(story_cache, tmp_path / "cache")
    split = _train(str(copy))
    loader = WindowMixture([NamedSource("stories", split, 1.0)], seq_len=64, batch_size=2, seed=0)
    os.remove(copy / "train" / "part-00000.tokens")  # the cache vanishes under the reader
    prefetcher = Prefetcher(loader, torch.device("cpu"))
    try:
        with pytest.raises(FileNotFoundError):
            prefetcher.next()
    finally:
        prefetcher.close()


def test_one_dataset_gives_the_batches_of_its_seeded_epoch_permutations(story_cache):
    """With one dataset the rows are its windows in the order of PCG64([seed, 0, epoch]) permutations,
    epoch after epoch: the batches the loader drew before mixtures had schedules."""
    split = _train(story_cache)
    seq, batch = 128, 6
    n = (split.num_tokens - 1) // seq
    order = np.concatenate([np.random.Generator(np.random.PCG64([3, 0, e])).permutation(n) for e in range(2)])
    loader = WindowMixture([NamedSource("stories", split, 1.0)], seq_len=seq, batch_size=batch, seed=3)
    for b in range(n * 2 // batch):
        expected = np.stack(
            [split.tokens(w * seq, w * seq + seq + 1) for w in order[b * batch : (b + 1) * batch]]
        )
        assert np.array_equal(loader.next_batch(), expected.astype(np.int64))


class _Bucket:
    """A stand-in for a bucket: fsspec's memory filesystem under its own protocol, every ranged read
    counted, each waiting `latency` seconds, and the most reads in flight at once recorded."""

    def __init__(self, latency: float):
        import threading

        import fsspec
        from fsspec.implementations.memory import MemoryFileSystem

        bucket = self

        class Slow(MemoryFileSystem):
            protocol = "slowbucket"

            @classmethod
            def _strip_protocol(cls, path):
                return super()._strip_protocol(path.removeprefix("slowbucket://"))

            def cat_file(self, path, start=None, end=None, **kwargs):
                with bucket.lock:
                    bucket.reads += 1
                    bucket.in_flight += 1
                    bucket.most_in_flight = max(bucket.most_in_flight, bucket.in_flight)
                try:
                    time.sleep(latency)
                    return super().cat_file(path, start=start, end=end, **kwargs)
                finally:
                    with bucket.lock:
                        bucket.in_flight -= 1

        self.lock = threading.Lock()
        self.reads = self.in_flight = self.most_in_flight = 0
        fsspec.register_implementation("slowbucket", Slow, clobber=True)
        self.fs = Slow()

    def upload(self, folder: str, name: str) -> str:
        for path in Path(folder).rglob("*"):
            if path.is_file():
                self.fs.pipe_file(f"/{name}/{path.relative_to(folder)}", path.read_bytes())
        return f"slowbucket://{name}"


def test_batches_read_from_a_bucket_equal_local_ones_in_few_concurrent_coalesced_reads(
    story_cache, other_cache
):
    import uuid

    import storage

    bucket = _Bucket(latency=0.01)
    remote = [bucket.upload(c, f"{uuid.uuid4().hex}/{i}") for i, c in enumerate((story_cache, other_cache))]
    try:
        local = _mixture(story_cache, other_cache, seq_len=16, batch_size=32, seed=4)
        sources = [
            NamedSource("stories", _train(remote[0]), 3.0),
            NamedSource("other", _train(remote[1]), 1.0),
        ]
        far = WindowMixture(sources, seq_len=16, batch_size=32, seed=4)
        bucket.reads = 0
        assert np.array_equal(far.next_batch(), local.next_batch())
        assert bucket.reads < 32 and bucket.most_in_flight >= 2  # coalesced, and in flight together
        prefetcher = Prefetcher(far, torch.device("cpu"), depth=3)
        try:
            for _ in range(6):
                batch = prefetcher.next()
                rows = local.next_batch()
                assert torch.equal(batch.inputs, torch.from_numpy(rows[:, :-1]))
                assert batch.loader_state == local.state_dict()
        finally:
            prefetcher.close()
    finally:
        storage.forget_clients()
        bucket.fs.rm("/" + remote[0].split("://")[1].split("/")[0], recursive=True)
