"""Tokenization speed: our tokenize step end to end (read JSONL, encode, write the cache) against raw
`tokenizers` `encode_batch` on the same texts, in the same run, on one core.

Both sides are pinned to one thread (RAYON_NUM_THREADS=1, TOKENIZERS_PARALLELISM=false) and our step
runs on zephyr's sync backend, so the figures are tokens per second per core. Texts are embedded-
corpus stories written to JSONL files; the tokenizer is a byte-level BPE trained on them (or
--tokenizer). Prints one JSON object: tokens/s/core of each, their ratio (goal >= 0.85), and the
ratio against `encode_batch_fast` (no offsets), which our step uses. Best of --rounds for each.
"""

from __future__ import annotations

import os

os.environ["RAYON_NUM_THREADS"] = "1"  # before tokenizers is imported: one core on both sides
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import orjson  # noqa: E402

BATCH = 512


def raw_encode(tok, texts: list[str], fast: bool) -> int:
    """Encode every text in batches of BATCH with the Rust tokenizer alone; the number of tokens."""
    encode = tok.encode_batch_fast if fast else tok.encode_batch
    total = 0
    for i in range(0, len(texts), BATCH):
        total += sum(len(e.ids) for e in encode(texts[i : i + BATCH], add_special_tokens=False))
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--documents", type=int, default=20_000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokenizer", default=None, help="a tokenizer folder; default: train a 4,096-id BPE")
    args = parser.parse_args()

    from tokenizers import Tokenizer

    from marin.data.corpus import stories
    from marin.data.sources import SourceConfig
    from marin.data.tokenize_step import TokenizeConfig, run_tokenize
    from marin.data.tokenizer_training import train_byte_level_bpe
    from zephyr import ZephyrConfig

    work = tempfile.mkdtemp(prefix="marin-tokspeed-")
    try:
        texts = list(stories(0, args.documents))
        per_file = -(-len(texts) // args.files)
        for f in range(args.files):
            with open(os.path.join(work, f"part-{f}.jsonl"), "wb") as out:
                for t in texts[f * per_file : (f + 1) * per_file]:
                    out.write(orjson.dumps({"text": t}) + b"\n")
        tokenizer = args.tokenizer
        if tokenizer is None:
            tokenizer = os.path.join(work, "tokenizer")
            train_byte_level_bpe(texts[:5_000], 4096, tokenizer)
        tok = Tokenizer.from_file(os.path.join(tokenizer, "tokenizer.json"))

        config = TokenizeConfig(
            SourceConfig(paths=(os.path.join(work, "*.jsonl"),)),
            tokenizer=tokenizer,
            validation_fraction=0.05,
            zephyr=ZephyrConfig(backend="sync", quiet=True),
        )
        raw_best = fast_best = ours_best = float("inf")
        raw_tokens = ours_tokens = 0
        for r in range(args.rounds):
            t0 = time.perf_counter()
            raw_tokens = raw_encode(tok, texts, fast=False)
            raw_best = min(raw_best, time.perf_counter() - t0)
            t0 = time.perf_counter()
            raw_encode(tok, texts, fast=True)
            fast_best = min(fast_best, time.perf_counter() - t0)
            out = os.path.join(work, f"cache-{r}")
            t0 = time.perf_counter()
            summary = run_tokenize(config, out)
            ours_best = min(ours_best, time.perf_counter() - t0)
            ours_tokens = sum(summary["tokens"].values())
        text_bytes = sum(len(t.encode()) for t in texts)
        # our token count includes one EOS per document; compare like with like
        ours_rate = (ours_tokens - len(texts)) / ours_best
        raw_rate = raw_tokens / raw_best
        fast_rate = raw_tokens / fast_best
        print(
            json.dumps(
                {
                    "benchmark": "tokenize_speed",
                    "documents": len(texts),
                    "text_mb": round(text_bytes / 1e6, 2),
                    "tokens": raw_tokens,
                    "vocab_size": tok.get_vocab_size(),
                    "cores": 1,
                    "ours_tokens_per_s_per_core": round(ours_rate),
                    "raw_encode_batch_tokens_per_s_per_core": round(raw_rate),
                    "raw_encode_batch_fast_tokens_per_s_per_core": round(fast_rate),
                    "ratio_vs_encode_batch": round(ours_rate / raw_rate, 3),
                    "ratio_vs_encode_batch_fast": round(ours_rate / fast_rate, 3),
                    "goal_ratio": 0.85,
                    "meets_goal": ours_rate / raw_rate >= 0.85,
                    "load_average": [round(x, 2) for x in os.getloadavg()],
                    "rounds": args.rounds,
                }
            )
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
