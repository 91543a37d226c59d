"""Training tokens/s of marin's trainer against a minimal plain-PyTorch loop: same model, batch and data,
for each architecture.

    .venv/bin/python benchmarks/train_cpu_throughput.py [--steps 20] [--seq-len 512] [--batch-size 8] [--arch qwen3]

The data is a real token cache: the embedded story corpus tokenized (through `tokenized()`) with a
byte-level BPE trained on it (asked for 4,096 entries; 3,000 stories yield about 1,700). The model is
`experiments.llama.llama_30m`'s shape in each registered architecture (llama, qwen3, olmo2, ...:
the same width, depth, heads and MLP, with each one's norms and QK-norm; a mixture-of-experts
takes the MLP's width as each of its 8 experts', top-2), at that vocabulary.
Baseline: the same module and AdamW, the same batches drawn beforehand from the same loader
into memory, then forward to the model's loss (plus its auxiliary losses: a mixture-of-experts')
/ backward / the recipe's gradient clipping / step / zero_grad and nothing else. Ours:
`train()` with its prefetch thread, LR schedule, grad clipping, metrics.jsonl and progress bar.
The two alternate step by step in one process (a baseline step runs in the trainer's per-step
hook, outside the trainer's timed period), so both see the same load on a shared machine. Figures
are medians over the steps after `--warmup`. Prints one JSON object; the goal is ratio >= 0.97 for
every architecture (callbacks, metrics and the loader cost nothing measurable).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from experiments.llama import llama_30m  # noqa: E402
from marin.data.corpus import SOURCE_NAME, stories  # noqa: E402
from marin.data.token_cache import TokenCache  # noqa: E402
from marin.data.tokenizer_training import train_byte_level_bpe  # noqa: E402
from marin.execution.step_runner import StepRunner  # noqa: E402
from marin.experiment.data import tokenized  # noqa: E402
from marin.training.callbacks import Callback  # noqa: E402
from marin.training.config import TrainConfig  # noqa: E402
from marin.training.datasets import DatasetInput  # noqa: E402
from marin.training.loader import NamedSource, WindowMixture  # noqa: E402
from marin.training.models import architectures  # noqa: E402
from marin.training.optim import AdamConfig  # noqa: E402
from marin.training.schedules import Cosine  # noqa: E402
from marin.training.trainer import TrainJob, train  # noqa: E402
from zephyr import ZephyrConfig  # noqa: E402

GOAL = 0.97


def build_cache(root: str, chat_template: str | None = None) -> str:
    """A token cache of 3,000 embedded stories with a BPE (at most 4,096 entries, under
    `root/tokenizer`, with `chat_template` when given) trained on them."""
    tokenizer = os.path.join(root, "tokenizer")
    train_byte_level_bpe(stories(0, 3000), 4096, tokenizer, chat_template=chat_template)
    handle = tokenized(
        "tokenized/bench",
        tokenizer=tokenizer,
        source=SOURCE_NAME,
        sample_count=3000,
        validation_fraction=0.01,
        zephyr=ZephyrConfig(backend="sync"),
    )
    (path,) = StepRunner(prefix=os.path.join(root, "steps"), progress=False).run([handle]).outcomes
    return path


def loader_batches(
    cache: str, *, seq_len: int, batch_size: int, steps: int, seed: int = 0
) -> list[torch.Tensor]:
    """The first `steps` batches the trainer's loader draws from the token cache at `cache`, as tensors."""
    loader = WindowMixture(
        [NamedSource("bench", TokenCache.open(cache).split("train"), 1.0)],
        seq_len=seq_len,
        batch_size=batch_size,
        seed=seed,
    )
    return [torch.from_numpy(loader.next_batch()) for _ in range(steps)]


class PlainLoop:
    """The baseline: the same Llama and AdamW, the same batches drawn beforehand, and nothing else."""

    def __init__(self, config: TrainConfig, cache: str, steps: int):
        opened = TokenCache.open(cache)
        self.batches = loader_batches(
            cache, seq_len=config.seq_len, batch_size=config.batch_size, steps=steps, seed=config.seed
        )
        torch.manual_seed(config.seed + 1)
        self.model = config.model.with_vocab_size(opened.vocab_size).build()
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=config.optimizer.learning_rate, foreach=True
        )
        self.max_norm = config.optimizer.max_grad_norm

    def step(self, i: int) -> float:
        """Run step `i`; return its seconds."""
        rows = self.batches[i]
        start = time.perf_counter()
        loss, aux = self.model(rows[:, :-1], rows[:, 1:])  # the model's loss; a MoE's aux losses too
        (loss + sum(aux.values())).backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)  # the recipe's clipping
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        loss.item()
        return time.perf_counter() - start


def interleaved(config: TrainConfig, cache: str, out: str) -> tuple[list[float], list[float], float]:
    """Run our trainer; after each of its steps, one baseline step. Returns both step times and the data wait.

    A trainer step's time is the period between the end of the previous baseline step and the start
    of the next (the hook): everything the trainer does per step (waiting for data, forward,
    backward, clipping, the optimizer, metrics, the progress bar), and no baseline work.
    """
    hook = Interleave(PlainLoop(config, cache, config.num_train_steps))
    config = dataclasses.replace(config, callbacks=(hook,))
    summary = train(TrainJob(config, (DatasetInput("bench", cache, 1.0),), out))
    return hook.ours, hook.base, summary["data_wait_seconds_this_run"]


class Interleave(Callback):
    """After each trainer step, one baseline step; times the trainer's step as the period between."""

    def __init__(self, plain: PlainLoop):
        self.plain, self.ours, self.base = plain, [], []
        self.last = time.perf_counter()

    def on_train_start(self, trainer) -> None:
        self.last = time.perf_counter()

    def on_step_end(self, trainer, step) -> None:
        self.ours.append(time.perf_counter() - self.last)
        self.base.append(self.plain.step(step.step - 1))
        self.last = time.perf_counter()


def shape_in(architecture: str):
    """llama_30m's shape (width, depth, heads, MLP) as a config of `architecture`, or None when that
    architecture's config takes other fields (a mixture-of-experts: give it its own size)."""
    cls = architectures()[architecture]
    shape = {f.name: getattr(llama_30m, f.name) for f in dataclasses.fields(llama_30m) if f.init}
    try:
        return cls(**shape)
    except TypeError:
        return None


def measure(architecture: str, model, cache: str, root: str, args: argparse.Namespace) -> dict:
    """One architecture: our train() against the plain loop, step by step."""
    config = TrainConfig(
        model=model,
        optimizer=AdamConfig(learning_rate=1e-3, schedule=Cosine(warmup=2)),
        batch_size=args.batch_size,
        seq_len=args.seq_len,
        num_train_steps=args.steps,
        keep_last_k=1,
        eval_max_tokens=args.seq_len + 1,
    )
    ours, plain, wait = interleaved(config, cache, os.path.join(root, f"run-{architecture}"))
    # the first steps warm up; the last one includes the final eval, checkpoint and export
    ours, plain = ours[args.warmup : -1], plain[args.warmup : -1]
    tokens = args.batch_size * args.seq_len
    ours_tps, plain_tps = tokens / statistics.median(ours), tokens / statistics.median(plain)
    return {
        "timed_step_pairs": len(ours),
        "marin_tokens_per_s": round(ours_tps, 1),
        "plain_pytorch_tokens_per_s": round(plain_tps, 1),
        "ratio": round(ours_tps / plain_tps, 4),
        "ratio_median_of_pairs": round(
            statistics.median(p / o for p, o in zip(plain, ours, strict=False)), 4
        ),
        "meets_goal": ours_tps / plain_tps >= GOAL,
        "marin_data_wait_s_total": round(wait, 6),
        "marin_data_wait_fraction_of_step_time": round(wait / sum(ours), 6),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument(
        "--arch", nargs="+", default=None, help="architectures (default: every registered one)"
    )
    args = parser.parse_args()
    results: dict[str, dict | str] = {}
    with tempfile.TemporaryDirectory(prefix="marin-bench-train-") as root:
        cache = build_cache(root)
        vocab_size = TokenCache.open(cache).vocab_size
        for architecture in args.arch or sorted(architectures()):
            model = shape_in(architecture)
            if model is None:
                results[architecture] = "not measured: its config has no llama_30m shape"
                continue
            results[architecture] = measure(architecture, model, cache, root, args)
    measured = [r for r in results.values() if isinstance(r, dict)]
    print(
        json.dumps(
            {
                "benchmark": "train_cpu_throughput",
                "model_shape": "llama_30m",
                "vocab_size": vocab_size,
                "batch_size": args.batch_size,
                "seq_len": args.seq_len,
                "torch_threads": torch.get_num_threads(),
                "architectures": results,
                "ratio_min": min(r["ratio"] for r in measured),
                "goal_ratio": GOAL,
                "meets_goal": all(r["meets_goal"] for r in measured),
                "load_average": [round(x, 2) for x in os.getloadavg()],
            }
        )
    )


if __name__ == "__main__":
    main()
