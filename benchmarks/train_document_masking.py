"""Step time with document masking against without, at seq 2048: same model, batches and loop, interleaved.

    .venv/bin/python benchmarks/train_document_masking.py [--steps 8] [--warmup 2] [--seq-len 2048]
        [--batch-size 2] [--device cpu|cuda]

The data is the real token cache `train_cpu_throughput.py` builds (the embedded stories, each ending
with EOS, a few hundred tokens long, so a 2048-token window holds several); the model is
`experiments.llama.llama_30m` at that vocabulary. A step is the trainer's: forward with the model's
loss, backward, clipping, AdamW's step. The masked step passes `document_eos` (attention within
documents, positions restarting at each: `marin.training.document_masking`); the plain one does
not. Two models built from one seed alternate step by step on the same batches, so both see the
same load on a shared machine; figures are medians over the steps after `--warmup`. Goal: masked /
plain step time ≤ 1.3. `--device cuda` measures the flex-attention kernel in bf16 autocast (the
trainer's precision on a GPU); without a CUDA device it prints "not measured: no device". Prints
one JSON object.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fresh import load_average  # noqa: E402
from train_cpu_throughput import build_cache, loader_batches  # noqa: E402

from experiments.llama import llama_30m  # noqa: E402
from marin.data.token_cache import TokenCache  # noqa: E402
from marin.training.optim import AdamConfig  # noqa: E402

GOAL_RATIO = 1.3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = parser.parse_args()
    base = {"benchmark": "train_document_masking", "device": args.device, "seq_len": args.seq_len}
    if args.device == "cuda" and not torch.cuda.is_available():
        print(json.dumps({**base, "note": "not measured: no device", "meets_goal": None}))
        return
    device = torch.device(args.device)
    with tempfile.TemporaryDirectory(prefix="marin-bench-docmask-") as root:
        path = build_cache(root)
        rows = loader_batches(path, seq_len=args.seq_len, batch_size=args.batch_size, steps=args.steps)
        batches = [b.to(device) for b in rows]
        cache = TokenCache.open(path)
        eos, vocab = cache.eos_id, cache.vocab_size
    documents = [int((b[:, :-1] == eos).sum()) + b.shape[0] for b in batches]
    tokens_per_document = args.batch_size * args.seq_len * len(batches) / sum(documents)
    model_config = llama_30m.with_vocab_size(vocab)
    autocast = (
        torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else contextlib.nullcontext()
    )

    def runner(options: dict):
        torch.manual_seed(0)
        model = model_config.build().to(device)
        optimizer = AdamConfig(learning_rate=1e-3).build(model, fused=device.type == "cuda")
        params = list(model.parameters())

        def step(rows: torch.Tensor) -> float:
            if device.type == "cuda":
                torch.cuda.synchronize()
            started = time.perf_counter()
            with autocast:
                loss, _ = model(rows[:, :-1], rows[:, 1:], **options)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            loss.item()
            return time.perf_counter() - started

        return step

    plain_step, masked_step = runner({}), runner({"document_eos": eos})
    plain, masked = [], []
    for rows in batches:
        plain.append(plain_step(rows))
        masked.append(masked_step(rows))
    plain_s, masked_s = statistics.median(plain[args.warmup :]), statistics.median(masked[args.warmup :])
    ratio = masked_s / plain_s
    print(
        json.dumps(
            {
                **base,
                "model": "llama_30m",
                "vocab_size": vocab,
                "batch_size": args.batch_size,
                "timed_steps": len(plain) - args.warmup,
                "torch_threads": torch.get_num_threads(),
                "mean_tokens_per_document": round(float(np.mean(tokens_per_document)), 1),
                "plain_step_s": round(plain_s, 4),
                "masked_step_s": round(masked_s, 4),
                "ratio_masked_vs_plain": round(ratio, 4),
                "goal_ratio": GOAL_RATIO,
                "load_average": load_average(),
                "meets_goal": ratio <= GOAL_RATIO,
            }
        )
    )


if __name__ == "__main__":
    main()
