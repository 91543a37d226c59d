"""Step time of Muon (MuonConfig) against AdamW (AdamConfig) on llama_30m on CPU: same model, batches and loop.

    .venv/bin/python benchmarks/train_muon_cpu.py [--steps 12] [--warmup 2] [--seq-len 512] [--batch-size 8]

The data is the real token cache `train_cpu_throughput.py` builds (the embedded stories, a BPE of
about 1,700 entries); the model `experiments.llama.llama_30m` at that vocabulary, built from one seed
twice. Each step is what the trainer does per step: the schedule set on every parameter group,
forward, cross-entropy, backward, gradient clipping, the optimizer's step and zero_grad. The two
optimizers alternate step by step on the same batches in one process, so both see the same load
on a shared machine; figures are medians over the steps after `--warmup`. Muon's own share (its
`step()` alone) is timed too. Goal: Muon / AdamW step time ≤ 1.2. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fresh import load_average  # noqa: E402
from train_cpu_throughput import build_cache, loader_batches  # noqa: E402

from experiments.llama import llama_30m  # noqa: E402
from marin.data.token_cache import TokenCache  # noqa: E402
from marin.training.optim import AdamConfig, MuonConfig, OptimizerConfig, set_scheduled_lr  # noqa: E402
from marin.training.schedules import Cosine  # noqa: E402

GOAL_RATIO = 1.2


class Run:
    """One optimizer's training loop over the shared batches."""

    def __init__(self, config: OptimizerConfig, model_config, steps: int):
        torch.manual_seed(0)
        self.model = model_config.build()
        self.config, self.steps = config, steps
        self.optimizer = config.build(self.model)
        self.params = list(self.model.parameters())
        self.optimizer_seconds: list[float] = []

    def step(self, i: int, rows: torch.Tensor) -> float:
        started = time.perf_counter()
        set_scheduled_lr(self.optimizer, self.config, i, self.steps)
        logits = self.model(rows[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), rows[:, 1:].flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, self.config.max_grad_norm)
        before = time.perf_counter()
        self.optimizer.step()
        self.optimizer_seconds.append(time.perf_counter() - before)
        self.optimizer.zero_grad(set_to_none=True)
        loss.item()
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="marin-bench-muon-") as root:
        path = build_cache(root)
        batches = loader_batches(path, seq_len=args.seq_len, batch_size=args.batch_size, steps=args.steps)
        model_config = llama_30m.with_vocab_size(TokenCache.open(path).vocab_size)
    adam = Run(AdamConfig(learning_rate=1e-3, schedule=Cosine(warmup=2)), model_config, args.steps)
    muon = Run(
        MuonConfig(learning_rate=0.02, adam_learning_rate=1e-3, schedule=Cosine(warmup=2)),
        model_config,
        args.steps,
    )
    adam_s, muon_s = [], []
    for i, rows in enumerate(batches):
        adam_s.append(adam.step(i, rows))
        muon_s.append(muon.step(i, rows))
    adam_med = statistics.median(adam_s[args.warmup :])
    muon_med = statistics.median(muon_s[args.warmup :])
    ratio = muon_med / adam_med
    print(
        json.dumps(
            {
                "benchmark": "train_muon_cpu",
                "model": "llama_30m",
                "vocab_size": model_config.vocab_size,
                "batch_size": args.batch_size,
                "seq_len": args.seq_len,
                "timed_steps": len(adam_s) - args.warmup,
                "torch_threads": torch.get_num_threads(),
                "adamw_step_s": round(adam_med, 4),
                "muon_step_s": round(muon_med, 4),
                "adamw_optimizer_step_s": round(statistics.median(adam.optimizer_seconds[args.warmup :]), 4),
                "muon_optimizer_step_s": round(statistics.median(muon.optimizer_seconds[args.warmup :]), 4),
                "ratio_muon_vs_adamw": round(ratio, 4),
                "goal_ratio": GOAL_RATIO,
                "load_average": load_average(),
                "meets_goal": ratio <= GOAL_RATIO,
            }
        )
    )


if __name__ == "__main__":
    main()
