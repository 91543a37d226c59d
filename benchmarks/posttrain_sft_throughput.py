"""SFT tokens/s against train_lm's on the same model, tokens per step and document lengths, in one run.

    .venv/bin/python benchmarks/posttrain_sft_throughput.py [--steps 20] [--seq-len 512] [--batch-size 8] [--repeats 3]

Model: `experiments.llama.llama_30m` at the vocabulary of a chat tokenizer trained on the embedded
stories (asked for 4,096 entries, with the "llama3" template). Data: `marin://tinystories-qa`
conversations, the same 2,000 for both. SFT renders them with the chat template and packs them whole
into `seq_len` windows (targets only on the replies); `train_lm` reads a token cache of the same
conversations rendered to text by the same template (`tokenized()` of a JSONL file), so its documents
have the conversations' lengths, and packs them as it packs any documents. Both are the same trainer
(`train()`) with document masking, the same batch and sequence length, so a step does the same
matmuls over documents of the same lengths; what SFT adds is the masking of targets and the packing of
whole conversations. The runs alternate (train_lm, SFT), `--repeats` times, each a fresh output; a
run's figure is the median of its steps' `step_seconds` after `--warmup` (the last step, with its
evaluation, checkpoint and export, is left out), and each variant's figure the best of its runs.

Goal: SFT tokens/s >= 0.9x train_lm's at equal document lengths.
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
from marin.data.file_documents import ShardStats  # noqa: E402
from marin.execution.step_runner import StepRunner  # noqa: E402
from marin.experiment.data import tokenized  # noqa: E402
from marin.posttrain.sft import SftObjective  # noqa: E402
from marin.training.config import TrainConfig  # noqa: E402
from marin.training.datasets import DatasetInput  # noqa: E402
from marin.training.export import export_hf  # noqa: E402
from marin.training.loading import exported_model  # noqa: E402
from marin.training.optim import AdamConfig  # noqa: E402
from marin.training.schedules import Cosine  # noqa: E402
from marin.training.trainer import TrainJob, train  # noqa: E402
from storage import read_records  # noqa: E402
from zephyr import ZephyrConfig  # noqa: E402

CONVERSATIONS = ChatData(source="marin://tinystories-qa", sample_count=2000)


def build_inputs(root: str) -> tuple[str, str]:
    """(a token cache of the benchmark's conversations rendered to text, an HF folder of llama_30m),
    sharing a chat tokenizer trained on the embedded stories."""
    from transformers import AutoTokenizer

    build_cache(root, chat_template="llama3")  # trains the tokenizer
    tokenizer_dir = os.path.join(root, "tokenizer")
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    texts = os.path.join(root, "conversations.jsonl")
    with open(texts, "w") as f:
        for messages in CONVERSATIONS.conversations(ShardStats()):
            f.write(json.dumps({"text": tokenizer.apply_chat_template(messages, tokenize=False)}) + "\n")
    handle = tokenized(
        "tokenized/conversations",
        tokenizer=tokenizer_dir,
        paths=[texts],
        validation_fraction=0.01,
        zephyr=ZephyrConfig(backend="sync"),
    )
    (cache,) = StepRunner(prefix=os.path.join(root, "steps"), progress=False).run([handle]).outcomes
    model = llama_30m.with_vocab_size(len(tokenizer))
    torch.manual_seed(0)
    hf = os.path.join(root, "base-hf")
    export_hf(model.build(), model, hf, tokenizer_dir=tokenizer_dir, eos_id=1, bos_id=0)
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
        weights = exported_model(hf)

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
            "train_lm": lambda out: TrainJob(
                config(True), (DatasetInput("bench", cache, 1.0),), out, init_from=hf
            ),
            "sft": lambda out: TrainJob(
                config(True), (), out, objective=SftObjective(CONVERSATIONS, weights=weights.hf_path)
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
    ratio = rates["sft"] / rates["train_lm"]
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
                "documents": "the same 2,000 marin://tinystories-qa conversations (rendered by the chat template)",
                "document_masking": True,
                "sft_tokens_per_s": round(rates["sft"], 1),
                "train_lm_tokens_per_s": round(rates["train_lm"], 1),
                "ratio": round(ratio, 4),
                "goal_ratio": 0.9,
                "meets_goal": ratio >= 0.9,
                "load_average": [round(x, 2) for x in os.getloadavg()],
            }
        )
    )


if __name__ == "__main__":
    main()
