"""Mixture-of-experts throughput against a dense model with the same active parameters, at two levels.

    .venv/bin/python benchmarks/moe_throughput.py [--level block|train|both] [--rounds 12] [--train-rounds 3]

8 experts, top-2, each expert half as wide as the dense model's MLP, so both apply the same weights
to a token (the MoE's routers add E × hidden per layer). Goal at each level: MoE tokens/s >= 0.5 ×
dense (`block_goal_met`, `train_goal_met`).

Block level: one MoE feed-forward (`marin.training.models.moe.MoEFeedForward`, experts as grouped
matmuls) against a SwiGLU of width top_k × expert_dim. A step is forward, a loss, and backward, on
`--tokens` tokens of width `--hidden`, float32 on CPU. The same run times the other ways to compute
the same experts, with the same weights and routing: Hugging Face's `OlmoeSparseMoeBlock` in its
eager form (a Python loop over experts) and with transformers' grouped_mm experts, and a per-expert
padded-capacity `bmm` (tokens scattered into an (E, max tokens of any expert, H) buffer). All of them
alternate round by round, so they share the machine's load; figures are medians over the rounds
after the first two.

Train level: marin's `train()` of `experiments.models.moe_30m` against `train()` of its dense twin
`experiments.llama.llama_30m`, on the token cache benchmarks/train_cpu_throughput.py builds, same
batch, sequence length, optimizer and seed. The two alternate for `--train-rounds` rounds (the
order flips each round); a figure is the median over every round's steps of the trainer's own
`step_seconds` (metrics.jsonl), leaving out each run's first `--warmup` steps and its last (which
holds the final evaluation, checkpoint and export). Prints one JSON object.
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

from train_cpu_throughput import build_cache  # noqa: E402

import storage  # noqa: E402
from experiments.llama import llama_30m  # noqa: E402
from experiments.models import moe_30m  # noqa: E402
from marin.training.config import TrainConfig  # noqa: E402
from marin.training.datasets import DatasetInput  # noqa: E402
from marin.training.models.layers import SwiGLUConfig  # noqa: E402
from marin.training.models.moe import MoEFeedForward, MoEFeedForwardConfig, expert_counts  # noqa: E402
from marin.training.optim import AdamConfig  # noqa: E402
from marin.training.schedules import Cosine  # noqa: E402
from marin.training.trainer import TrainJob, train  # noqa: E402

NUM_EXPERTS, TOP_K = 8, 2
GOAL = 0.5


def padded_capacity_experts(block: MoEFeedForward, x: torch.Tensor) -> torch.Tensor:
    """The block's routed experts computed the other vectorised way: per-expert capacity buffers and bmm."""
    _, _, weights, experts = block.gate(x)
    tokens, k = experts.shape
    flat = experts.reshape(-1)
    order = flat.argsort(stable=True)
    counts = expert_counts(experts, NUM_EXPERTS)
    capacity = int(counts.max())  # dropless: as many slots as the busiest expert needs
    starts = counts.cumsum(0) - counts
    sorted_experts = flat[order]
    slot = sorted_experts * capacity + torch.arange(flat.numel()) - starts[sorted_experts]
    buffer = x.new_zeros(NUM_EXPERTS * capacity, x.shape[1]).index_copy(0, slot, x[order // k])
    gate, up = torch.bmm(
        buffer.view(NUM_EXPERTS, capacity, -1), block.experts.gate_up_proj.transpose(1, 2)
    ).chunk(2, -1)
    out = torch.bmm(F.silu(gate) * up, block.experts.down_proj.transpose(1, 2)).reshape(-1, x.shape[1])[slot]
    per_slot = out.new_empty(out.shape).index_copy(0, order, out).view(tokens, k, -1)
    return (per_slot * weights.unsqueeze(-1)).sum(1)


def hf_block(block: MoEFeedForward, hidden: int, expert_dim: int, implementation: str) -> torch.nn.Module:
    """transformers' OlmoeSparseMoeBlock holding `block`'s weights, with the given experts implementation."""
    import transformers
    from transformers.models.olmoe.modeling_olmoe import OlmoeSparseMoeBlock

    config = transformers.OlmoeConfig(
        hidden_size=hidden,
        intermediate_size=expert_dim,
        num_experts=NUM_EXPERTS,
        num_experts_per_tok=TOP_K,
        experts_implementation=implementation,
    )
    theirs = OlmoeSparseMoeBlock(config)
    theirs.load_state_dict(block.state_dict())
    return theirs


def block_level(tokens: int, hidden: int, expert_dim: int, rounds: int) -> dict:
    """The block-level figures (see the module docstring)."""
    torch.manual_seed(0)
    moe = MoEFeedForwardConfig(
        hidden, expert_dim, NUM_EXPERTS, TOP_K, load_balancing_weight=0.01, router_z_weight=0.001
    ).build()
    dense = SwiGLUConfig(hidden, TOP_K * expert_dim).build()
    with torch.no_grad():
        for p in [*moe.parameters(), *dense.parameters()]:
            p.normal_(0.0, 0.02)
    hf_loop = hf_block(moe, hidden, expert_dim, "eager")
    hf_grouped = hf_block(moe, hidden, expert_dim, "grouped_mm")
    x = torch.randn(tokens, hidden)
    candidates = {
        "moe": lambda t: moe(t)[0],
        "dense": dense,
        "hf_expert_loop": lambda t: hf_loop(t.unsqueeze(0)),
        "hf_grouped_mm": lambda t: hf_grouped(t.unsqueeze(0)),
        "padded_capacity_bmm": lambda t: padded_capacity_experts(moe, t),
    }
    with torch.no_grad():
        reference = candidates["moe"](x)
        for name in ("hf_expert_loop", "hf_grouped_mm", "padded_capacity_bmm"):
            assert torch.allclose(candidates[name](x).view_as(reference), reference, atol=1e-5), name
    seconds: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(rounds):
        for name, fn in candidates.items():
            inputs = x.clone().requires_grad_()
            start = time.perf_counter()
            fn(inputs).square().mean().backward()
            seconds[name].append(time.perf_counter() - start)
    tps = {name: tokens / statistics.median(times[2:]) for name, times in seconds.items()}
    ratio = tps["moe"] / tps["dense"]
    active = sum(p.numel() for p in dense.parameters())
    return {
        "block_tokens": tokens,
        "block_hidden": hidden,
        "block_expert_dim": expert_dim,
        "block_active_parameters_dense": active,
        "block_active_parameters_moe": active + NUM_EXPERTS * hidden,
        "block_total_parameters_moe": sum(p.numel() for p in moe.parameters()),
        "block_timed_rounds": rounds - 2,
        **{f"block_{name}_tokens_per_s": round(value, 1) for name, value in tps.items()},
        "block_ratio_moe_vs_dense": round(ratio, 4),
        "block_ratio_moe_vs_hf_expert_loop": round(tps["moe"] / tps["hf_expert_loop"], 4),
        "block_ratio_moe_vs_hf_grouped_mm": round(tps["moe"] / tps["hf_grouped_mm"], 4),
        "block_ratio_moe_vs_padded_capacity_bmm": round(tps["moe"] / tps["padded_capacity_bmm"], 4),
        "block_goal_met": ratio >= GOAL,
    }


def train_level(rounds: int, steps: int, warmup: int, seq_len: int, batch_size: int) -> dict:
    """The train-level figures (see the module docstring)."""
    models = {"moe": moe_30m, "dense": llama_30m}
    seconds: dict[str, list[float]] = {name: [] for name in models}
    summaries: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="marin-bench-moe-") as root:
        cache = build_cache(root)
        for r in range(rounds):
            for name in list(models)[:: 1 if r % 2 == 0 else -1]:
                config = TrainConfig(
                    model=models[name],
                    optimizer=AdamConfig(learning_rate=1e-3, schedule=Cosine(warmup=2)),
                    batch_size=batch_size,
                    seq_len=seq_len,
                    num_train_steps=steps,
                    keep_last_k=1,
                    eval_max_tokens=seq_len + 1,
                )
                out = os.path.join(root, f"{name}-{r}")
                summaries[name] = train(TrainJob(config, (DatasetInput("bench", cache, 1.0),), out))
                records = storage.read_records(os.path.join(out, "metrics.jsonl"))
                seconds[name] += [rec["step_seconds"] for rec in records[warmup:-1]]
    tokens = batch_size * seq_len
    tps = {name: tokens / statistics.median(values) for name, values in seconds.items()}
    ratio = tps["moe"] / tps["dense"]
    active = {"moe": moe_30m, "dense": llama_30m}
    return {
        "train_models": {"moe": "moe_30m", "dense": "llama_30m"},
        "train_vocab_size": summaries["moe"]["vocab_size"],
        "train_parameters": {name: s["num_parameters"] for name, s in summaries.items()},
        "train_active_parameters": {
            "moe": active["moe"].with_vocab_size(summaries["moe"]["vocab_size"]).active_parameters(),
            "dense": summaries["dense"]["num_parameters"],
        },
        "train_batch_size": batch_size,
        "train_seq_len": seq_len,
        "train_rounds": rounds,
        "train_timed_steps_each": len(seconds["moe"]),
        "train_moe_tokens_per_s": round(tps["moe"], 1),
        "train_dense_tokens_per_s": round(tps["dense"], 1),
        "train_ratio_moe_vs_dense": round(ratio, 4),
        "train_goal_met": ratio >= GOAL,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--level", choices=["block", "train", "both"], default="both")
    parser.add_argument("--tokens", type=int, default=4096, help="block level: tokens per step")
    parser.add_argument("--hidden", type=int, default=256, help="block level")
    parser.add_argument("--expert-dim", type=int, default=512, help="block level")
    parser.add_argument("--rounds", type=int, default=12, help="block level")
    parser.add_argument("--train-rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=12, help="train level: steps per run")
    parser.add_argument("--warmup", type=int, default=2, help="train level")
    parser.add_argument("--seq-len", type=int, default=256, help="train level")
    parser.add_argument("--batch-size", type=int, default=8, help="train level")
    args = parser.parse_args()
    result = {
        "benchmark": "moe_throughput",
        "num_experts": NUM_EXPERTS,
        "top_k": TOP_K,
        "goal_ratio": GOAL,
        "torch_threads": torch.get_num_threads(),
    }
    if args.level in ("block", "both"):
        result |= block_level(args.tokens, args.hidden, args.expert_dim, args.rounds)
    if args.level in ("train", "both"):
        result |= train_level(args.train_rounds, args.steps, args.warmup, args.seq_len, args.batch_size)
    result["load_average"] = [round(v, 2) for v in os.getloadavg()]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
