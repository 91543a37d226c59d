"""SFT tokens/s against train_lm's on the same model and tokens per step, in one run.

    .venv/bin/python benchmarks/posttrain_sft_throughput.py [--steps 20] [--seq-len 512] [--batch-size 8] [--repeats 3]

Model: `experiments.llama.llama_30m` at the vocabulary of a chat tokenizer trained on the embedded
stories (asked for 4,096 entries, with the "llama3" template). Data: for `train_lm`, a token cache of
3,000 stories; for SFT, `marin://tinystories-qa` conversations packed into the same `seq_len` windows
(targets only on the replies) with document masking. Both are the same trainer (`train()`), with the
same batch and sequence length, so the step does the same matmuls; what SFT adds is the masking of
targets, the packing of whole conversations and document masking. The runs alternate (train_lm with
document masking, train_lm without, SFT), `--repeats` times, each a fresh output; a run's figure is
the median of its steps' `step_seconds` after `--warmup` (the last step, with its evaluation,
checkpoint and export, is left out), and each variant's figure the best of its runs.

Goal: SFT tokens/s >= 0.9x train_lm's with the same recipe (document masking on); the ratio to
train_lm without document masking is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from train_cpu_throughput import build_cache  # noqa: E402

from experiments.llama import llama_30m  # noqa: E402
from marin.data.chat import ChatData  # noqa: E402
from marin.posttrain.source import resolve  # noqa: E402
from marin.posttrain.trainer import Objective, PostTrainJob  # noqa: E402
from marin.training.config import TrainConfig  # noqa: E402
from marin.training.datasets import DatasetInput  # noqa: E402
from marin.training.export import export_hf  # noqa: E402
from marin.training.optim import AdamConfig  # noqa: E402
from marin.training.schedules import Cosine
from marin.training.trainer import TrainJob, train  # noqa: E402
from storage import read_records  # noqa: E402


def build_inputs(root: str) -> tuple[str, str]:
    """(a token cache of 3,000 stories, an HF folder of llama_30m) sharing a chat tokenizer."""
    from transformers import AutoTokenizer

    cache = build_cache(root, chat_template="llama3")
    tokenizer = os.path.join(root, "tokenizer")
    vocab = len(AutoTokenizer.from_pretrained(tokenizer))
    model = llama_30m.with_vocab_size(vocab)
    torch.manual_seed(0)
    hf = os.path.join(root, "base-hf")
    export_hf(model.build(), model, hf, tokenizer_dir=tokenizer, eos_id=1, bos_id=0)
    return cache, hf


def step_seconds(out: str, warmup: int) -> float:
    """The median step time of a finished run, after `warmup` steps and without its last step."""
    seconds = [r["step_seconds"] for r in read_records(os.path.join(out, "metrics.jsonl"))]
    return statistics.median(seconds[warmup:-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    best: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="marin-bench-sft-") as root:
        cache, hf = build_inputs(root)
        weights = resolve(hf)

        def config(document_masking: bool) -> TrainConfig:
            return TrainConfig(
                model=weights.model_config,
                optimizer=AdamConfig(learning_rate=1e-3, schedule=Cosine(warmup=2)),
                batch_size=args.batch_size,
                seq_len=args.seq_len,
                num_train_steps=args.steps,
                keep_last_k=1,
                eval_max_tokens=args.seq_len + 1,
                document_masking=document_masking,
                checkpoint_every_minutes=None,
            )

        runs = {
            "train_lm_document_masking": lambda out: TrainJob(
                config(True), (DatasetInput("bench", cache, 1.0),), out, init_from=hf
            ),
            "train_lm": lambda out: TrainJob(
                config(False), (DatasetInput("bench", cache, 1.0),), out, init_from=hf
            ),
            "sft": lambda out: PostTrainJob(
                config=config(True),
                datasets=(),
                output_path=out,
                objective=Objective.SFT,
                data=ChatData(source="marin://tinystories-qa", sample_count=2000),
                weights=weights.hf_path,
                tokenizer_path=weights.hf_path,
                base_hf_path=weights.hf_path,
            ),
        }
        for repeat in range(args.repeats):
            for name, job in runs.items():
                out = os.path.join(root, f"{name}-{repeat}")
                train(job(out))
                seconds = step_seconds(out, args.warmup)
                best[name] = min(best.get(name, float("inf")), seconds)
    tokens = args.batch_size * args.seq_len
    rates = {name: tokens / seconds for name, seconds in best.items()}
    ratio = rates["sft"] / rates["train_lm_document_masking"]
    print(
        json.dumps(
            {
                "benchmark": "posttrain_sft_throughput",
                "model": "llama_30m",
                "vocab_size": weights.model_config.vocab_size,
                "batch_size": args.batch_size,
                "seq_len": args.seq_len,
                "steps": args.steps,
                "repeats": args.repeats,
                "torch_threads": torch.get_num_threads(),
                "sft_tokens_per_s": round(rates["sft"], 1),
                "train_lm_document_masking_tokens_per_s": round(rates["train_lm_document_masking"], 1),
                "train_lm_tokens_per_s": round(rates["train_lm"], 1),
                "ratio": round(ratio, 4),
                "ratio_to_train_lm_without_document_masking": round(rates["sft"] / rates["train_lm"], 4),
                "goal_ratio": 0.9,
                "meets_goal": ratio >= 0.9,
                "load_average": [round(x, 2) for x in os.getloadavg()],
            }
        )
    )


if __name__ == "__main__":
    main()
