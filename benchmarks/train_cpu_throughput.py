"""Training tokens/s of marin's trainer against a minimal plain-PyTorch loop: same model, batch and data.

    .venv/bin/python benchmarks/train_cpu_throughput.py [--steps 12] [--rounds 2] [--seq-len 512] [--batch-size 8]

The data is a real token cache: the embedded story corpus tokenized (through `tokenized()`) with a
4,096-entry BPE trained on it. The model is `experiments.llama.llama_30m` at that vocabulary.
Baseline: the same Llama module and AdamW, batches drawn beforehand from the same loader into memory,
then forward / cross-entropy / backward / step / zero_grad and nothing else. Ours: `train()` with
its prefetch thread, LR schedule, grad clipping, metrics.jsonl and progress bar, but no eval or
checkpoint inside the timed steps. Each round runs both, alternately; the first `--warmup` steps
of each run are not timed. `ratio` compares the fastest step of each (the least disturbed by other
processes on a shared machine, as timeit does); `ratio_median` compares medians. Prints one JSON
object; the goal is ratio >= 0.95.
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from experiments.llama import llama_30m  # noqa: E402
from marin.data.corpus import SOURCE_NAME, stories  # noqa: E402
from marin.data.token_cache import TokenCache  # noqa: E402
from marin.data.tokenizer_training import train_byte_level_bpe  # noqa: E402
from marin.execution.step_runner import StepRunner  # noqa: E402
from marin.experiment.data import tokenized  # noqa: E402
from marin.training.datasets import DatasetInput  # noqa: E402
from marin.training.loader import NamedSource, WindowMixture  # noqa: E402
from marin.training.model import Llama  # noqa: E402
from marin.training.optim import AdamConfig  # noqa: E402
from marin.training.trainer import TrainConfig, TrainJob, train  # noqa: E402
from zephyr.config import ZephyrConfig  # noqa: E402


def build_cache(root: str) -> str:
    """A token cache of 3,000 embedded stories with a 4,096-entry BPE trained on them."""
    tokenizer = os.path.join(root, "tokenizer")
    train_byte_level_bpe(stories(0, 3000), 4096, tokenizer)
    handle = tokenized("tokenized/bench", tokenizer=tokenizer, source=SOURCE_NAME, sample_count=3000,
                       validation_fraction=0.01, zephyr=ZephyrConfig(backend="sync"))
    (path,) = StepRunner(prefix=os.path.join(root, "steps"), progress=False).run([handle]).outcomes
    return path


def plain_loop(config: TrainConfig, cache: str, steps: int, warmup: int) -> list[float]:
    """Seconds per step of the minimal loop (after `warmup` untimed steps)."""
    opened = TokenCache.open(cache)
    model_config = config.model.with_vocab_size(opened.vocab_size)
    loader = WindowMixture([NamedSource("bench", opened.split("train"), 1.0)], seq_len=config.seq_len,
                           batch_size=config.batch_size, seed=config.seed)
    batches = [torch.from_numpy(loader.next_batch()) for _ in range(steps)]
    torch.manual_seed(config.seed)
    model = Llama(model_config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.optimizer.learning_rate, foreach=True)
    times = []
    for i, rows in enumerate(batches):
        start = time.perf_counter()
        logits = model(rows[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), rows[:, 1:].flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        loss.item()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return times


def marin_trainer(config: TrainConfig, cache: str, out: str, warmup: int) -> tuple[list[float], float]:
    """Seconds per step as our trainer logged them, and the seconds its steps waited for data."""
    summary = train(TrainJob(config, (DatasetInput("bench", cache, 1.0),), out))
    with open(os.path.join(out, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f]
    return [r["step_seconds"] for r in records[warmup:]], summary["data_wait_seconds_this_run"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="marin-bench-train-") as root:
        cache = build_cache(root)
        vocab_size = TokenCache.open(cache).vocab_size
        config = TrainConfig(
            model=llama_30m, optimizer=AdamConfig(learning_rate=1e-3, warmup=2), batch_size=args.batch_size,
            seq_len=args.seq_len, num_train_steps=args.steps, keep_last_k=1, eval_max_tokens=args.seq_len + 1,
        )
        ours, plain, waits = [], [], []
        for r in range(args.rounds):
            plain += plain_loop(config, cache, args.steps, args.warmup)
            times, wait = marin_trainer(config, cache, os.path.join(root, f"run-{r}"), args.warmup)
            ours += times
            waits.append(wait)
    tokens = args.batch_size * args.seq_len
    ours_tps, plain_tps = tokens / min(ours), tokens / min(plain)
    ratio_median = statistics.median(plain) / statistics.median(ours)
    print(json.dumps({
        "benchmark": "train_cpu_throughput",
        "model": "llama_30m",
        "vocab_size": vocab_size,
        "batch_size": args.batch_size,
        "seq_len": args.seq_len,
        "timed_steps_each": len(ours),
        "torch_threads": torch.get_num_threads(),
        "marin_tokens_per_s_best_step": round(ours_tps, 1),
        "plain_pytorch_tokens_per_s_best_step": round(plain_tps, 1),
        "ratio": round(ours_tps / plain_tps, 4),
        "ratio_median": round(ratio_median, 4),
        "goal_ratio": 0.95,
        "marin_data_wait_s_total": round(sum(waits), 6),
        "marin_data_wait_fraction_of_step_time": round(sum(waits) / (sum(ours) * args.steps / len(ours) * args.rounds), 6),
    }))


if __name__ == "__main__":
    main()
