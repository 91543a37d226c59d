"""Contamination lookup: evaluation items against a model's training tokens (issue 35: 10,000 items
against a 100M-token lineage in <= 60 s on 2 cores, and linear in items).

The training data is a token cache written here (`--tokens` uint16 ids over a 32,000-id vocabulary,
in 1M-token documents: what `TokenCache` memory-maps for the look-up, as for a real lineage); the
items are `--items` token sequences of 200 ids, one in ten copied out of the training tokens (so
matches are found and counted). `contamination.item_overlap` over `training_blocks` is timed for
a quarter, a half and all of the items, in one run: the figure is the time for all of them, and the
ratio of time per item at all of them to time per item at a quarter (<= 1: linear or better). The
baseline in the same run is one pass of numpy over the same blocks (their sum), what reading the
tokens alone costs.

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fresh import load_average  # noqa: E402


def write_cache(folder: str, tokens: int, seed: int) -> None:
    """A one-split token cache in the layout `marin.data.token_cache` reads (ledger, shards)."""
    import numpy as np
    import orjson

    from marin.data.token_cache import FORMAT, FORMAT_VERSION, LEDGER, shard_path

    rng = np.random.default_rng(seed)
    per_doc = 1_000_000
    shards = []
    os.makedirs(os.path.join(folder, "train"), exist_ok=True)
    for index, start in enumerate(range(0, tokens, 16 * per_doc)):
        count = min(16 * per_doc, tokens - start)
        ids = rng.integers(1, 32_000, size=count, dtype=np.uint16)
        offsets = np.append(np.arange(0, count, per_doc, dtype="<i8"), count).astype("<i8")
        ids.astype("<u2").tofile(shard_path(folder, "train", index, ".tokens"))
        offsets.tofile(shard_path(folder, "train", index, ".offsets"))
        np.full(len(offsets) - 1, 4 * per_doc, dtype="<i8").tofile(
            shard_path(folder, "train", index, ".bytes")
        )
        shards.append({"documents": len(offsets) - 1, "tokens": count})
    ledger = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "dtype": "uint16",
        "vocab_size": 32_000,
        "eos_id": 0,
        "tokenizer_fingerprint": "synthetic",
        "eos_policy": "append",
        "bos_policy": "none",
        "splits": {
            "train": {
                "documents": sum(s["documents"] for s in shards),
                "tokens": tokens,
                "bytes": 4 * tokens,
                "shards": shards,
            }
        },
    }
    with open(os.path.join(folder, LEDGER), "wb") as f:
        f.write(orjson.dumps(ledger))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--tokens", type=int, default=100_000_000)
    parser.add_argument("--ngram", type=int, default=13)
    args = parser.parse_args()
    import numpy as np

    from marin.data.token_cache import TokenCache
    from marin.evaluation.contamination import item_overlap, training_blocks

    work = tempfile.mkdtemp(prefix="eval-contamination-")
    write_cache(work, args.tokens, seed=0)
    train = TokenCache.open(work).split("train")
    rng = np.random.default_rng(1)
    items = []
    for i in range(args.items):
        if i % 10 == 0:
            start = int(rng.integers(0, args.tokens - 200))
            items.append([np.asarray(train.tokens(start, start + 200), dtype=np.int64)])
        else:
            items.append([rng.integers(1, 32_000, size=200)])

    start = time.perf_counter()
    total = sum(int(block.sum(dtype=np.int64) % 7) for block in training_blocks([work], args.ngram))
    read_s = time.perf_counter() - start
    timings = {}
    for share in (4, 2, 1):
        chosen = items[: args.items // share]
        start = time.perf_counter()
        overlap = item_overlap(chosen, training_blocks([work], args.ngram), args.ngram)
        timings[len(chosen)] = time.perf_counter() - start
        planted = overlap.share()[::10]
        assert np.all(planted == 1.0), "a copied item was not found"
        assert np.all(overlap.share()[[i for i in range(len(chosen)) if i % 10]] < 0.05)
    shutil.rmtree(work)
    full, quarter = timings[args.items], timings[args.items // 4]
    per_item_ratio = (full / args.items) / (quarter / (args.items // 4))
    print(
        json.dumps(
            {
                "benchmark": "eval_contamination",
                "items": args.items,
                "training_tokens": args.tokens,
                "ngram": args.ngram,
                "seconds": {str(k): round(v, 2) for k, v in sorted(timings.items())},
                "read_tokens_s": round(read_s, 2),
                "ratio_to_read": round(full / read_s, 2),
                "per_item_ratio_full_to_quarter": round(per_item_ratio, 3),
                "checksum": total,
                "goal": "<= 60 s for all items, per-item time not growing with items",
                "goal_met": full <= 60 and per_item_ratio <= 1.1,
                "load_average": load_average(),
            }
        )
    )


if __name__ == "__main__":
    main()
