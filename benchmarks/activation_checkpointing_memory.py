"""Peak memory of one training step under each activation-checkpointing mode, on CPU, and its loss.

    .venv/bin/python benchmarks/activation_checkpointing_memory.py            # llama_30m, seq 2048, batch 4
    .venv/bin/python benchmarks/activation_checkpointing_memory.py --small    # a tiny model (the test's)

For each mode ("none", "full", "selective") the model (`--model`, from `experiments.models` or
`experiments.llama`, at `--vocab` entries: the logits, which no checkpointing shrinks, stay small
beside the activations, as with a demo-sized tokenizer) is built from one seed, its blocks wrapped
as the trainer wraps them (`marin.training.blocks.checkpoint_blocks`), and one forward and
backward run on one fixed batch of random tokens. The figure is the step's peak of memory held by
tensors: every allocation and free of torch's CPU allocator during the step, as `torch.profiler`
records them (`profile_memory=True`), summed in time order; the CPU counterpart of CUDA's
`max_memory_allocated`. (The process's resident size would not do: glibc keeps freed memory mapped,
so its high-water mark grows with fragmentation, not with what is in use.) The baseline is "none"
in the same run; the goal is full / none <= 0.6. The losses and gradients of the modes must agree.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from marin.training.blocks import checkpoint_blocks  # noqa: E402

MODES = ("none", "full", "selective")
GOAL = 0.6


def peak_tensor_bytes(step) -> tuple[int, object]:
    """The peak bytes held by tensors allocated while `step()` runs, and what it returned."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = step()
    events = sorted(
        (e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"),
        key=lambda e: e.start_ns(),
    )
    held = peak = 0
    for event in events:
        held += event.nbytes()
        peak = max(peak, held)
    return peak, result


def measure(config, mode: str, batch_size: int, seq_len: int) -> dict:
    """One mode: the peak tensor memory of a forward and backward, the loss and a gradient digest."""
    torch.manual_seed(0)
    model = config.build()
    checkpoint_blocks(config.blocks(model), mode)
    rows = torch.randint(
        0, config.vocab_size, (batch_size, seq_len + 1), generator=torch.Generator().manual_seed(1)
    )

    def step():
        loss, _ = model(rows[:, :-1], rows[:, 1:])
        loss.backward()
        return loss.item()

    peak, loss = peak_tensor_bytes(step)
    grads = torch.cat([p.grad.flatten() for p in model.parameters()]).double()
    return {
        "peak_bytes": peak,
        "loss": loss,
        "grad_sum": grads.sum().item(),
        "grad_abs_sum": grads.abs().sum().item(),
    }


def model_config(name: str, vocab: int):
    """`name` from experiments.models or experiments.llama ("small": the test's tiny Llama)."""
    from experiments import llama, models
    from marin.training.models import LlamaConfig

    if name == "small":
        return LlamaConfig(
            hidden_dim=64, intermediate_dim=256, num_layers=4, num_heads=4, max_seq_len=512, vocab_size=vocab
        )
    return (getattr(models, name, None) or getattr(llama, name)).with_vocab_size(vocab)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="llama_30m")
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--small", action="store_true", help="a tiny model at seq 512: checks the script")
    args = parser.parse_args()
    if args.small:
        args.model, args.seq_len, args.batch_size, args.vocab = "small", 512, 2, 256
    config = model_config(args.model, args.vocab)
    runs = {mode: measure(config, mode, args.batch_size, args.seq_len) for mode in MODES}
    none = runs["none"]
    ratio = {mode: runs[mode]["peak_bytes"] / none["peak_bytes"] for mode in MODES}
    print(
        json.dumps(
            {
                "benchmark": "activation_checkpointing_memory",
                "model": args.model,
                "architecture": config.architecture,
                "seq_len": args.seq_len,
                "batch_size": args.batch_size,
                "vocab_size": args.vocab,
                "peak_tensor_mib": {m: round(runs[m]["peak_bytes"] / 2**20, 1) for m in MODES},
                "ratio_full_vs_none": round(ratio["full"], 4),
                "ratio_selective_vs_none": round(ratio["selective"], 4),
                "loss": {m: runs[m]["loss"] for m in MODES},
                "max_loss_difference": max(abs(runs[m]["loss"] - none["loss"]) for m in MODES),
                "grad_sums": {m: runs[m]["grad_sum"] for m in MODES},
                "grad_abs_sums": {m: runs[m]["grad_abs_sum"] for m in MODES},
                "goal_ratio_full": GOAL,
                "goal_met": ratio["full"] <= GOAL,
                "load_average": [round(x, 2) for x in os.getloadavg()],
            }
        )
    )


if __name__ == "__main__":
    main()
