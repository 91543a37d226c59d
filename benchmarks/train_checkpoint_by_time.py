"""What checkpointing by wall time (the default: every 10 minutes) adds to the demo's training.

    .venv/bin/python benchmarks/train_checkpoint_by_time.py [--steps 100] [--repeats 3]

The demo's training step: `llama_nano`, seq 2048, batch 4, 100 steps, AdamW lr 6e-4, on the
embedded story corpus (tokenized with a BPE trained on it, as train_cpu_throughput.py builds it).
Each repeat trains it twice in one process, in alternating order: with the default settings
(`checkpoint_every_minutes=10`) and with checkpointing by time off (`None`, so only the final
checkpoint). The figure is the ratio of their loop times (`train_seconds_this_run`, medians over
the repeats); goal <= 1.02. A demo run is shorter than 10 minutes, so the default adds its
per-step clock check and no checkpoint; what a checkpoint by time costs when one is due is
reported beside it: the seconds one checkpoint of this model (weights, AdamW state, RNG) takes to
write with the trainer's Checkpointer, and that cost as a share of the 10-minute interval. Prints
one JSON object.
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from train_cpu_throughput import build_cache  # noqa: E402

from experiments.llama import llama_nano  # noqa: E402
from marin.data.token_cache import TokenCache  # noqa: E402
from marin.training.checkpoint import Checkpointer, TrainState  # noqa: E402
from marin.training.config import TrainConfig  # noqa: E402
from marin.training.datasets import DatasetInput  # noqa: E402
from marin.training.optim import AdamConfig  # noqa: E402
from marin.training.rng import capture_rng  # noqa: E402
from marin.training.trainer import TrainJob, train  # noqa: E402

GOAL = 1.02
DEFAULT_MINUTES = TrainConfig.__dataclass_fields__["checkpoint_every_minutes"].default


def demo_config(steps: int, minutes: float | None) -> TrainConfig:
    """The demo's training step (experiments/tutorials/demo.py), with `checkpoint_every_minutes`."""
    return TrainConfig(
        model=llama_nano,
        optimizer=AdamConfig(learning_rate=6e-4, weight_decay=0.1),
        batch_size=4,
        seq_len=2048,
        num_train_steps=steps,
        checkpoint_every_minutes=minutes,
    )


def one_checkpoint_seconds(vocab_size: int, root: str) -> float:
    """The wall time of writing one whole-format checkpoint of the demo's model, with AdamW state."""
    model = llama_nano.with_vocab_size(vocab_size).build()
    optimizer = AdamConfig().build(model)
    model(torch.zeros((1, 8), dtype=torch.long), torch.zeros((1, 8), dtype=torch.long))[0].backward()
    optimizer.step()  # AdamW's moments exist, as in a run
    checkpointer = Checkpointer(os.path.join(root, "timed"), sharded=False, keep_last_k=1)
    times = []
    for step in range(1, 4):
        state = TrainState(step, {}, capture_rng(), "bench", {})
        started = time.perf_counter()
        checkpointer.save(model=model, optimizer=optimizer, state=state)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"default": [], "off": []}
    with tempfile.TemporaryDirectory(prefix="marin-bench-ckpt-time-") as root:
        cache = build_cache(root)
        datasets = (DatasetInput("stories", cache, 1.0),)
        for repeat in range(args.repeats):
            order = ("default", "off") if repeat % 2 == 0 else ("off", "default")
            for which in order:
                minutes = DEFAULT_MINUTES if which == "default" else None
                out = os.path.join(root, f"run-{repeat}-{which}")
                summary = train(TrainJob(demo_config(args.steps, minutes), datasets, out))
                times[which].append(summary["train_seconds_this_run"])
        checkpoint_s = one_checkpoint_seconds(TokenCache.open(cache).vocab_size, root)
    ratio = statistics.median(times["default"]) / statistics.median(times["off"])
    print(
        json.dumps(
            {
                "benchmark": "train_checkpoint_by_time",
                "model": "llama_nano",
                "steps": args.steps,
                "repeats": args.repeats,
                "checkpoint_every_minutes_default": DEFAULT_MINUTES,
                "train_seconds_default": [round(t, 3) for t in times["default"]],
                "train_seconds_time_checkpoints_off": [round(t, 3) for t in times["off"]],
                "ratio_default_vs_off": round(ratio, 4),
                "one_checkpoint_s": round(checkpoint_s, 4),
                "checkpoint_share_of_interval": round(checkpoint_s / (DEFAULT_MINUTES * 60), 6),
                "goal_ratio": GOAL,
                "goal_met": ratio <= GOAL,
                "load_average": [round(x, 2) for x in os.getloadavg()],
            }
        )
    )


if __name__ == "__main__":
    main()
