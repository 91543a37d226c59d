"""Tokens/s the training loader delivers from a token cache on a bucket 20 ms away, against serial reads.

    .venv/bin/python benchmarks/train_loader_bucket.py [--latency-ms 20] [--seq-len 2048] [--batch-size 64]
        [--batches 40] [--baseline-batches 3] [--prefetch 4] [--shards 16] [--shard-tokens 4000000]

The store is `latency://` of `storage_round_trips.py`: a local folder behind fsspec, every call
counted and delayed by `--latency-ms`. On it, a token cache of `--shards` shards of
`--shard-tokens` uint16 tokens each (documents of random lengths, each ending with EOS), written
with the tokenize step's own shard writer and ledger. The process is pinned to one core.

- Ours: the trainer's `Prefetcher` (depth `--prefetch`, the trainer's default 4) over a `WindowMixture`
  of that cache, with nothing else consuming the batches: tokens delivered per second over
  `--batches` batches, counted from the first batch handed out (the pipeline's fill is not
  counted; it is reported as `first_batch_s`).
- Baseline, in the same run: the loader as it read before (each window its own `tokens()` call, one
  after another, on one background thread): the same plan, with the cache's `tokens_many` hidden
  and one reader thread. Storage calls per batch include the batches read ahead when it stopped.
The first `--baseline-batches` batches of both are checked to be identical. Goal: ≥ 1M tokens/s at
seq 2048, batch 64. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fresh import load_average  # noqa: E402
from storage_round_trips import register  # noqa: E402

GOAL_TOKENS_PER_S = 1_000_000


def write_cache(root: str, shards: int, shard_tokens: int, seed: int = 0) -> None:
    """A token cache of random documents, written as the tokenize step writes one (local paths)."""
    from marin.data.token_cache import FORMAT, FORMAT_VERSION, SPLITS
    from marin.data.token_cache_writer import ShardWriter, write_ledger

    rng = np.random.default_rng(seed)
    vocab, eos = 50_000, 0
    summaries = {split: [] for split in SPLITS}
    for index in range(shards):
        for split, size in (("train", shard_tokens), ("validation", 4096)):
            lengths = []
            while sum(lengths) < size:
                lengths.append(int(rng.integers(200, 4000)))
            lengths[-1] -= sum(lengths) - size
            tokens = rng.integers(1, vocab, size=size, dtype=np.uint16)
            tokens[np.cumsum(lengths) - 1] = eos
            writer = ShardWriter(root, split, index, np.dtype("<u2"))
            writer.add(tokens, np.array(lengths), np.array(lengths) * 4)
            summaries[split].append(writer.publish().to_json())
    splits = {
        split: {
            "documents": sum(s["documents"] for s in shards_),
            "tokens": sum(s["tokens"] for s in shards_),
            "bytes": sum(s["bytes"] for s in shards_),
            "shards": shards_,
        }
        for split, shards_ in summaries.items()
    }
    write_ledger(
        root,
        {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "dtype": "<u2",
            "vocab_size": vocab,
            "eos_id": eos,
            "bos_id": None,
            "tokenizer_fingerprint": "synthetic",
            "splits": splits,
        },
    )


class SerialSource:
    """The cache split as the loader read it before: one `tokens()` call per window, nothing else."""

    def __init__(self, split):
        self._split = split
        self.num_tokens = split.num_tokens

    def tokens(self, start: int, stop: int) -> np.ndarray:
        return self._split.tokens(start, stop)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--baseline-batches", type=int, default=3)
    parser.add_argument("--prefetch", type=int, default=4)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--shard-tokens", type=int, default=4_000_000)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    root = tempfile.mkdtemp(prefix="marin-loader-bucket-")
    os.environ["LATENCY_ROOT"] = root
    os.environ["LATENCY_S"] = "0"
    fs = register()
    import torch

    from marin.data.token_cache import TokenCache
    from marin.training.loader import NamedSource, Prefetcher, WindowMixture

    try:
        write_cache(os.path.join(root, "cache"), args.shards, args.shard_tokens)
        os.environ["LATENCY_S"] = str(args.latency_ms / 1000)
        split = TokenCache.open("latency://cache").split("train")

        def loader(source) -> WindowMixture:
            return WindowMixture(
                [NamedSource("bucket", source, 1.0)], seq_len=args.seq_len, batch_size=args.batch_size, seed=0
            )

        tokens_per_batch = args.batch_size * args.seq_len

        def deliver(source, batches: int, depth: int) -> tuple[float, float, list[np.ndarray], int]:
            fs.reset()
            started = time.perf_counter()
            prefetcher = Prefetcher(loader(source), torch.device("cpu"), depth=depth)
            try:
                first = prefetcher.next()
                counted_from = time.perf_counter()
                kept = [first.inputs.numpy().copy()]
                for _ in range(batches - 1):
                    batch = prefetcher.next()
                    if len(kept) < args.baseline_batches:
                        kept.append(batch.inputs.numpy().copy())
                ended = time.perf_counter()
            finally:
                prefetcher.close()
            calls = sum(fs.calls.values())
            rate = tokens_per_batch * (batches - 1) / (ended - counted_from)
            return rate, counted_from - started, kept, calls

        if args.baseline_batches < 2:
            parser.error("--baseline-batches must be ≥ 2 (one batch is the pipeline's fill)")
        serial_rate, serial_first, serial_kept, serial_calls = deliver(
            SerialSource(split), args.baseline_batches, 1
        )
        ours_rate, ours_first, ours_kept, ours_calls = deliver(split, args.batches, args.prefetch)
        identical = all(np.array_equal(a, b) for a, b in zip(serial_kept, ours_kept, strict=False))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(
        json.dumps(
            {
                "benchmark": "train_loader_bucket",
                "latency_ms": args.latency_ms,
                "seq_len": args.seq_len,
                "batch_size": args.batch_size,
                "prefetch": args.prefetch,
                "cache_tokens": args.shards * args.shard_tokens,
                "cpu_cores_pinned": 1,
                "batches": args.batches,
                "tokens_per_s": round(ours_rate),
                "first_batch_s": round(ours_first, 3),
                "storage_calls_per_batch": round(ours_calls / args.batches, 2),
                "serial_tokens_per_s": round(serial_rate),
                "serial_first_batch_s": round(serial_first, 3),
                "serial_storage_calls_per_batch": round(serial_calls / args.baseline_batches, 2),
                "ratio_vs_serial": round(ours_rate / serial_rate, 2),
                "batches_identical": identical,
                "goal_tokens_per_s": GOAL_TOKENS_PER_S,
                "load_average": load_average(),
                "meets_goal": identical and ours_rate >= GOAL_TOKENS_PER_S,
            }
        )
    )


if __name__ == "__main__":
    main()
