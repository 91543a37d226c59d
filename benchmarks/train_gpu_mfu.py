"""MFU of marin's trainer on one GPU: llama_150m, seq 1024, bf16 autocast, fused AdamW, torch.compile.

    .venv/bin/python benchmarks/train_gpu_mfu.py            # on a CUDA machine (goal: mfu >= 0.40)
    .venv/bin/python benchmarks/train_gpu_mfu.py --smoke    # a tiny CPU run that checks the script

Data: a token cache of uniformly random ids over the Marin tokenizer's 128,256-entry vocabulary,
written with the token cache writer (MFU does not depend on what the tokens say). MFU is
tokens/s × `LlamaConfig.flops_per_token(seq_len)` (6·N_matmul + 12·L·H·Q·T) over the device's dense
bf16 peak from `marin.training.metrics.CUDA_PEAK_BF16` (H100/H200: 989 TFLOP/s; override with
MARIN_PEAK_FLOPS). The same run times a plain PyTorch loop (same model, autocast, fused AdamW,
compile, batches already on the GPU) as the baseline. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import storage  # noqa: E402
from experiments.llama import REFERENCE_VOCAB_SIZE, llama_150m  # noqa: E402
from marin.data.token_cache import token_dtype  # noqa: E402
from marin.data.token_cache_writer import ShardWriter, write_ledger  # noqa: E402
from marin.data.tokenize_pipeline import build_ledger  # noqa: E402
from marin.training.config import TrainConfig
from marin.training.datasets import DatasetInput  # noqa: E402
from marin.training.metrics import peak_flops_per_device  # noqa: E402
from marin.training.model import Llama, LlamaConfig  # noqa: E402
from marin.training.optim import AdamConfig  # noqa: E402
from marin.training.trainer import TrainJob, train  # noqa: E402


def write_random_cache(root: str, vocab_size: int, tokens: int, seed: int = 0) -> str:
    """A token cache of `tokens` random ids in 1,024-token documents (train) plus a small validation split."""
    rng = np.random.default_rng(seed)
    dtype = token_dtype(vocab_size)
    splits = {}
    for split, count in (("train", tokens), ("validation", 8 * 1024)):
        writer = ShardWriter(root, split, 0, dtype)
        docs = count // 1024
        writer.add(rng.integers(0, vocab_size, docs * 1024), np.full(docs, 1024), np.full(docs, 4096))
        splits[split] = writer.publish().to_json()
    tokenizer = {
        "vocab_size": vocab_size,
        "eos_id": vocab_size - 1,
        "bos_id": None,
        "eos_token": "<eos>",
        "bos_token": None,
        "tokenizer_fingerprint": "synthetic:uniform",
        "tokenizer": "synthetic",
    }
    ledger = build_ledger(
        [{"index": 0, "splits": splits, "bad_examples": [], "bad_records": 0}],
        dtype=dtype.str,
        tokenizer=tokenizer,
        source={"kind": "synthetic"},
        sample_count=None,
        validation_fraction=0.0,
        bad_records_policy="fail",
    )
    write_ledger(root, ledger)
    return root


def plain_loop(
    model_config: LlamaConfig, batch: int, seq: int, steps: int, device: torch.device, compile: bool
) -> list[float]:
    """Seconds per step of a minimal loop with the same model and settings (no loader, no logging)."""
    torch.manual_seed(0)
    model = Llama(model_config).to(device)
    train_model = torch.compile(model) if compile else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
    rows = torch.randint(0, model_config.vocab_size, (steps, batch, seq + 1), device=device)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")
    times = []
    for i in range(steps):
        start = time.perf_counter()
        with autocast:
            logits = train_model(rows[i, :, :-1])
            loss = F.cross_entropy(logits.flatten(0, 1).float(), rows[i, :, 1:].flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        loss.item()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--smoke", action="store_true", help="tiny CPU run: checks the script, measures nothing"
    )
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument(
        "--warmup", type=int, default=10, help="untimed first steps (compilation, autotuning)"
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--no-compile", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        model, vocab, device = LlamaConfig(64, 128, 2, 4, max_seq_len=256), 1024, "cpu"
        args.steps, args.warmup, args.batch_size, args.seq_len, compile = 4, 1, 2, 128, False
    else:
        if not torch.cuda.is_available():
            sys.exit("train_gpu_mfu.py needs a CUDA device; use --smoke to check it on CPU")
        model, vocab, device, compile = llama_150m, REFERENCE_VOCAB_SIZE, "cuda", not args.no_compile
        torch.backends.cuda.matmul.allow_tf32 = True
    with tempfile.TemporaryDirectory(prefix="marin-bench-mfu-") as root:
        cache = write_random_cache(
            os.path.join(root, "cache"), vocab, (args.steps + 2) * args.batch_size * args.seq_len
        )
        config = TrainConfig(
            model=model,
            optimizer=AdamConfig(learning_rate=3e-4, warmup=2),
            batch_size=args.batch_size,
            seq_len=args.seq_len,
            num_train_steps=args.steps,
            eval_max_tokens=args.seq_len + 1,
            keep_last_k=1,
            device=device,
            compile=compile,
        )
        summary = train(TrainJob(config, (DatasetInput("random", cache, 1.0),), os.path.join(root, "run")))
        records = storage.read_records(os.path.join(root, "run", "metrics.jsonl"))[args.warmup :]
    dev = torch.device(device)
    model_config = model.with_vocab_size(vocab)
    plain = plain_loop(model_config, args.batch_size, args.seq_len, args.steps, dev, compile)[args.warmup :]
    tokens = args.batch_size * args.seq_len
    ours_tps = tokens / statistics.median(r["step_seconds"] for r in records)
    plain_tps = tokens / statistics.median(plain)
    flops = model_config.flops_per_token(args.seq_len)
    peak = peak_flops_per_device(dev)
    print(
        json.dumps(
            {
                "benchmark": "train_gpu_mfu",
                "smoke": args.smoke,
                "device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu",
                "model": "llama_150m" if not args.smoke else "smoke",
                "vocab_size": vocab,
                "batch_size": args.batch_size,
                "seq_len": args.seq_len,
                "compile": compile,
                "timed_steps": len(records),
                "flops_per_token": flops,
                "peak_flops": peak,
                "marin_tokens_per_s": round(ours_tps, 1),
                "marin_mfu": round(ours_tps * flops / peak, 4),
                "plain_pytorch_tokens_per_s": round(plain_tps, 1),
                "plain_pytorch_mfu": round(plain_tps * flops / peak, 4),
                "ratio": round(ours_tps / plain_tps, 4),
                "goal_mfu": 0.40,
                "meets_goal": None if args.smoke else ours_tps * flops / peak >= 0.40,
                "load_average": [round(x, 2) for x in os.getloadavg()],
                "data_wait_fraction": round(summary["data_wait_fraction"], 6),
                "final_loss": summary["final_loss"],
            }
        )
    )


if __name__ == "__main__":
    main()
