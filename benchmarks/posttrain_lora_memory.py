"""LoRA's optimizer memory and checkpoint size against full fine-tuning's, at llama_30m, in one run.

    .venv/bin/python benchmarks/posttrain_lora_memory.py [--vocab 4096] [--rank 8] [--steps 2]

Both runs fine-tune the same `experiments.llama.llama_30m` (at the vocabulary of a chat tokenizer
trained on the embedded stories, asked for `--vocab` entries) by SFT on `marin://tinystories-qa`
for `--steps` steps: one with every weight trained, one with `LoraConfig(rank, targets=q, k, v, o)`.
Optimizer memory is the bytes of the optimizer's state tensors after the last step (AdamW's two
moments and step count per trained parameter); checkpoint size the bytes of the final checkpoint
folder (weights or adapters, optimizer state, loader and RNG state, checksums). Goal: both <= 5% of
full fine-tuning's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from experiments.llama import llama_30m  # noqa: E402
from marin.data.chat import ChatData  # noqa: E402
from marin.data.corpus import stories  # noqa: E402
from marin.data.tokenizer_training import train_byte_level_bpe  # noqa: E402
from marin.posttrain.lora import LoraConfig  # noqa: E402
from marin.posttrain.sft import SftObjective  # noqa: E402
from marin.training.callbacks import Callback  # noqa: E402
from marin.training.config import TrainConfig  # noqa: E402
from marin.training.export import export_hf  # noqa: E402
from marin.training.loading import exported_model  # noqa: E402
from marin.training.optim import AdamConfig  # noqa: E402
from marin.training.trainer import TrainJob, train  # noqa: E402


class OptimizerBytes(Callback):
    """Records the bytes of the optimizer's state tensors at the end of the run."""

    def __init__(self) -> None:
        self.bytes = 0

    def on_train_end(self, trainer, summary) -> None:
        self.bytes = sum(
            value.numel() * value.element_size()
            for state in trainer.optimizer.state.values()
            for value in state.values()
            if torch.is_tensor(value)
        )


def folder_bytes(folder: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(folder) for f in files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    figures: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory(prefix="marin-bench-lora-") as root:
        from transformers import AutoTokenizer

        tokenizer = os.path.join(root, "tokenizer")
        train_byte_level_bpe(stories(0, 3000), args.vocab, tokenizer, chat_template="llama3")
        model = llama_30m.with_vocab_size(len(AutoTokenizer.from_pretrained(tokenizer)))
        torch.manual_seed(0)
        export_hf(model.build(), model, os.path.join(root, "hf"), tokenizer_dir=tokenizer, eos_id=1, bos_id=0)
        weights = exported_model(os.path.join(root, "hf"))
        lora = LoraConfig(
            rank=args.rank, alpha=2.0 * args.rank, targets=("q_proj", "k_proj", "v_proj", "o_proj")
        )
        for name, adapters in (("full", None), ("lora", lora)):
            probe = OptimizerBytes()
            out = os.path.join(root, name)
            config = TrainConfig(
                model=weights.model_config,
                optimizer=AdamConfig(learning_rate=1e-3),
                batch_size=4,
                seq_len=512,
                num_train_steps=args.steps,
                keep_last_k=1,
                checkpoint_every_minutes=None,
                document_masking=True,
                callbacks=(probe,),
            )
            summary = train(
                TrainJob(
                    config=config,
                    datasets=(),
                    output_path=out,
                    objective=SftObjective(
                        ChatData(source="marin://tinystories-qa", sample_count=64),
                        weights=weights.hf_path,
                        lora=adapters,
                    ),
                )
            )
            figures[name] = {
                "optimizer_state_bytes": probe.bytes,
                "checkpoint_bytes": folder_bytes(summary["checkpoint_path"]),
                "trained_parameters": summary.get("trainable_parameters", model.num_parameters()),
            }
    memory = figures["lora"]["optimizer_state_bytes"] / figures["full"]["optimizer_state_bytes"]
    checkpoint = figures["lora"]["checkpoint_bytes"] / figures["full"]["checkpoint_bytes"]
    print(
        json.dumps(
            {
                "benchmark": "posttrain_lora_memory",
                "model": "llama_30m",
                "vocab_size": model.vocab_size,
                "parameters": model.num_parameters(),
                "lora": {"rank": args.rank, "targets": list(lora.targets)},
                "full": figures["full"],
                "lora_run": figures["lora"],
                "optimizer_memory_ratio": round(memory, 5),
                "checkpoint_size_ratio": round(checkpoint, 5),
                "goal_ratio": 0.05,
                "meets_goal": memory <= 0.05 and checkpoint <= 0.05,
                "load_average": [round(x, 2) for x in os.getloadavg()],
            }
        )
    )


if __name__ == "__main__":
    main()
