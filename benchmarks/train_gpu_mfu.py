"""MFU of marin's trainer on one GPU, for the ~150M and ~1B size of every dense family and the MoE: FSDP2 bf16, compile.

    .venv/bin/python benchmarks/train_gpu_mfu.py            # on a CUDA machine (goal: mfu >= 0.40 at ~1B)
    .venv/bin/python benchmarks/train_gpu_mfu.py --smoke    # a tiny CPU run that checks the script
    .venv/bin/python benchmarks/train_gpu_mfu.py --model llama_1_4b qwen3_1b   # some of them

One script runs them all: `experiments.models.DENSE_SIZES` (llama_150m, llama_1_4b, qwen3_150m,
qwen3_1b, olmo2_150m, olmo2_1b) and the mixture-of-experts sizes `experiments.models` offers
(`MOE_SIZES`, when registered). `--parallelism fsdp` (the default) shards the model with FSDP2
`fully_shard` per block and on the root, as `train_lm(parallelism="fsdp")` does, on a process group
of one: bf16 parameters and compute, fp32 gradient reduction, fp32 master weights; `ddp` is bf16
autocast over fp32 weights. `compile="auto"` compiles each block (`--no-compile` turns it off).
Batch 32 below 500M parameters, 8 above, seq 1024, fused AdamW. Without a CUDA device (and without
--smoke) it prints the JSON with "not measured: no device" and exits 0.

Data: a token cache of uniformly random ids over the Marin tokenizer's 128,256-entry vocabulary,
written with the token cache writer (MFU does not depend on what the tokens say). MFU is
tokens/s × `ModelConfig.flops_per_token(seq_len)` (6·N_active_matmul + 12·L·H·Q·T; a
mixture-of-experts counts the experts a token uses) over the device's dense bf16 peak from
`marin.training.metrics.CUDA_PEAK_BF16` (H100/H200: 989 TFLOP/s; override with MARIN_PEAK_FLOPS).
Peak memory is `torch.cuda.max_memory_allocated` over the run. The same run times a plain PyTorch
loop (the same model wrapped the same way: FSDP per block, compile per block, same precision, fused
AdamW, batches already on the GPU) as the baseline. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import storage  # noqa: E402
from experiments import models as sizes  # noqa: E402
from marin.data.token_cache import token_dtype  # noqa: E402
from marin.data.token_cache_writer import ShardWriter, write_ledger  # noqa: E402
from marin.data.tokenize_pipeline import build_ledger  # noqa: E402
from marin.training.blocks import compile_blocks  # noqa: E402
from marin.training.config import Parallelism, TrainConfig  # noqa: E402
from marin.training.datasets import DatasetInput  # noqa: E402
from marin.training.fsdp import shard_model  # noqa: E402
from marin.training.metrics import peak_flops_per_device  # noqa: E402
from marin.training.models import ModelConfig  # noqa: E402
from marin.training.optim import AdamConfig  # noqa: E402
from marin.training.schedules import Cosine  # noqa: E402
from marin.training.trainer import TrainJob, train  # noqa: E402

GOAL_MFU = 0.40  # at ~1B, on an H100/H200-class GPU


def default_batch(config: ModelConfig) -> int:
    """32 sequences of 1,024 below 500M parameters, 8 above (a 1.4B model's activations at batch 8 x 1024
    with its 128k-entry logits fit an 80 GB H100 beside its fp32 weights, gradients and AdamW state)."""
    return 32 if config.with_vocab_size(sizes.REFERENCE_VOCAB_SIZE).num_parameters() < 500e6 else 8


def all_models() -> dict[str, ModelConfig]:
    """Every size this benchmark runs: the dense families' ~150M and ~1B, and the MoE's."""
    return {**sizes.DENSE_SIZES, **getattr(sizes, "MOE_SIZES", {})}


def smoke_models() -> dict[str, ModelConfig]:
    """--smoke: each architecture's nano size, at a short context, on CPU."""
    return {
        f"smoke-{arch}": dataclasses.replace(config, max_seq_len=256) for arch, config in sizes.NANO.items()
    }


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


@contextlib.contextmanager
def group_of_one(device: torch.device):
    """A torch.distributed group of this one process (FSDP needs one), unless one exists already."""
    if dist.is_initialized():
        yield
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend=backend, store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def plain_loop(
    model_config: ModelConfig,
    batch: int,
    seq: int,
    steps: int,
    device: torch.device,
    compile: bool,
    parallelism: Parallelism,
) -> list[float]:
    """Seconds per step of a minimal loop with the same model and settings (no loader, no logging)."""
    torch.manual_seed(0)
    fsdp = parallelism == Parallelism.FSDP
    model = model_config.build().to(device)
    blocks = model_config.blocks(model)
    if compile:
        compile_blocks(blocks)  # per block, as the trainer's compile="auto" does on CUDA
    with group_of_one(device) if fsdp else contextlib.nullcontext():
        if fsdp:
            shard_model(model, blocks, device)  # bf16 params and compute on CUDA, as the trainer's
        train_model = model
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
        rows = torch.randint(0, model_config.vocab_size, (steps, batch, seq + 1), device=device)
        autocast = torch.autocast(
            device.type, dtype=torch.bfloat16, enabled=device.type == "cuda" and not fsdp
        )
        times = []
        for i in range(steps):
            start = time.perf_counter()
            with autocast:
                loss, aux = train_model(rows[i, :, :-1], rows[i, :, 1:])  # a MoE's aux losses too
                objective = loss + sum(aux.values())
            objective.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            loss.item()
            times.append(time.perf_counter() - start)
    return times


def measure(
    name: str,
    model: ModelConfig,
    batch: int,
    args: argparse.Namespace,
    vocab: int,
    device: str,
    compile: bool,
) -> dict:
    """One model: marin's train() and the plain loop, same batch, parallelism and precision."""
    parallelism = Parallelism(args.parallelism)
    with tempfile.TemporaryDirectory(prefix="marin-bench-mfu-") as root:
        cache = write_random_cache(
            os.path.join(root, "cache"), vocab, (args.steps + 2) * batch * args.seq_len
        )
        config = TrainConfig(
            model=model,
            optimizer=AdamConfig(learning_rate=3e-4, schedule=Cosine(warmup=2)),
            batch_size=batch,
            seq_len=args.seq_len,
            num_train_steps=args.steps,
            eval_max_tokens=args.seq_len + 1,
            keep_last_k=1,
            checkpoint_every=None,
            device=device,
            compile=compile,
            parallelism=parallelism,
        )
        _reset_peak_memory()
        summary = train(TrainJob(config, (DatasetInput("random", cache, 1.0),), os.path.join(root, "run")))
        ours_peak = _peak_memory()
        records = storage.read_records(os.path.join(root, "run", "metrics.jsonl"))[args.warmup :]
    _release_memory()
    dev = torch.device(device)
    model_config = model.with_vocab_size(vocab)
    _reset_peak_memory()
    plain = plain_loop(model_config, batch, args.seq_len, args.steps, dev, compile, parallelism)[
        args.warmup :
    ]
    plain_peak = _peak_memory()
    _release_memory()
    tokens = batch * args.seq_len
    ours_tps = tokens / statistics.median(r["step_seconds"] for r in records)
    plain_tps = tokens / statistics.median(plain)
    flops = model_config.flops_per_token(args.seq_len)
    peak = peak_flops_per_device(dev)
    mfu = ours_tps * flops / peak
    return {
        "model": name,
        "architecture": model_config.architecture,
        "parameters": model_config.num_parameters(),
        "batch_size": batch,
        "timed_steps": len(records),
        "flops_per_token": flops,
        "marin_tokens_per_s": round(ours_tps, 1),
        "marin_mfu": round(mfu, 4),
        "plain_pytorch_tokens_per_s": round(plain_tps, 1),
        "plain_pytorch_mfu": round(plain_tps * flops / peak, 4),
        "ratio": round(ours_tps / plain_tps, 4),
        "marin_peak_memory_gib": ours_peak,
        "plain_pytorch_peak_memory_gib": plain_peak,
        "meets_goal": None if args.smoke or model_config.num_parameters() < 500e6 else mfu >= GOAL_MFU,
        "data_wait_fraction": round(summary["data_wait_fraction"], 6),
        "final_loss": summary["final_loss"],
    }


def _reset_peak_memory() -> None:
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def _peak_memory() -> float | None:
    """GiB at the peak since the last reset (`max_memory_allocated`); None off CUDA."""
    return round(torch.cuda.max_memory_allocated() / 2**30, 2) if torch.cuda.is_available() else None


def _release_memory() -> None:
    """Free the last run's GPU memory and compiled graphs before the next one."""
    gc.collect()
    torch._dynamo.reset()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--smoke", action="store_true", help="tiny CPU run: checks the script, measures nothing"
    )
    parser.add_argument("--parallelism", choices=[p.value for p in Parallelism], default="fsdp")
    parser.add_argument("--model", nargs="+", default=None, help="sizes to run (default: all of them)")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument(
        "--warmup", type=int, default=10, help="untimed first steps (compilation, autotuning)"
    )
    parser.add_argument(
        "--batch-size", type=int, default=None, help="default: 32 below 500M parameters, else 8"
    )
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--no-compile", action="store_true")
    args = parser.parse_args()
    out = {
        "benchmark": "train_gpu_mfu",
        "smoke": args.smoke,
        "parallelism": args.parallelism,
        "precision": (
            "bf16 parameters and compute, fp32 gradient reduction and master weights (FSDP2 MixedPrecisionPolicy)"
            if args.parallelism == "fsdp"
            else "bf16 autocast over fp32 weights"
        ),
        "goal_mfu": GOAL_MFU,
    }
    if args.smoke:
        models, vocab, device, compile = smoke_models(), 1024, "cpu", False
        args.steps, args.warmup, args.seq_len = 4, 1, 128
        out["precision"] = "fp32 (CPU)"
    elif not torch.cuda.is_available():
        out.update(
            {
                "device": "none",
                "note": "not measured: no device (needs a CUDA GPU; --smoke checks the script on CPU)",
                "models": {m: None for m in args.model or all_models()},
                "meets_goal": None,
                "load_average": [round(x, 2) for x in os.getloadavg()],
            }
        )
        print(json.dumps(out))
        return
    else:
        models, vocab, device, compile = all_models(), sizes.REFERENCE_VOCAB_SIZE, "cuda", not args.no_compile
        torch.backends.cuda.matmul.allow_tf32 = True
    unknown = sorted(set(args.model or ()) - set(models))
    if unknown:
        parser.error(f"unknown --model {unknown}; choose from {sorted(models)}")
    results = {}
    for name in args.model or models:
        model = models[name]
        results[name] = measure(
            name, model, args.batch_size or default_batch(model), args, vocab, device, compile
        )
    verdicts = [r["meets_goal"] for r in results.values() if r["meets_goal"] is not None]
    out.update(
        {
            "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
            "vocab_size": vocab,
            "seq_len": args.seq_len,
            "compile": compile,
            "peak_flops": peak_flops_per_device(torch.device(device)),
            "models": results,
            "meets_goal": None if args.smoke else all(verdicts),
            "load_average": [round(x, 2) for x in os.getloadavg()],
        }
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
