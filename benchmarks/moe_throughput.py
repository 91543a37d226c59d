"""Mixture-of-experts throughput against a dense model with the same active parameters.

    .venv/bin/python benchmarks/moe_throughput.py [--tokens 4096] [--hidden 256] [--expert-dim 512] [--rounds 12]

Block level: one MoE feed-forward (`marin.training.models.moe.MoEFeedForward`, 8 experts, top-2,
experts as grouped matmuls) against a dense SwiGLU whose intermediate width is top_k × expert_dim,
so both apply the same number of weights to each token (the router's E × H more for the MoE). One
step is forward, a loss, and backward, on `--tokens` tokens of width `--hidden`, float32 on CPU.
Beside the dense baseline the same run times the other ways to compute the same experts, each with
the same weights and routing: Hugging Face's `OlmoeSparseMoeBlock` in its eager form (a Python loop
over experts) and with transformers' own grouped_mm experts, and a per-expert padded-capacity `bmm`
(tokens scattered into an (E, max tokens of any expert, H) buffer). All of them alternate round by
round, so they share the machine's load; figures are medians over the rounds after the first two.
Goal: MoE tokens/s >= 0.5 × dense. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from marin.training.models.moe import MoEFeedForward, MoEFeedForwardConfig, SharedExpert, expert_counts  # noqa: E402

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--expert-dim", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args()
    torch.manual_seed(0)
    moe = MoEFeedForwardConfig(
        args.hidden, args.expert_dim, NUM_EXPERTS, TOP_K, load_balancing_weight=0.01, router_z_weight=0.001
    ).build()
    dense = SharedExpert(args.hidden, TOP_K * args.expert_dim)
    with torch.no_grad():
        for p in [*moe.parameters(), *dense.parameters()]:
            p.normal_(0.0, 0.02)
    hf_loop = hf_block(moe, args.hidden, args.expert_dim, "eager")
    hf_grouped = hf_block(moe, args.hidden, args.expert_dim, "grouped_mm")
    x = torch.randn(args.tokens, args.hidden)
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
    for _ in range(args.rounds):
        for name, fn in candidates.items():
            inputs = x.clone().requires_grad_()
            start = time.perf_counter()
            fn(inputs).square().mean().backward()
            seconds[name].append(time.perf_counter() - start)
    tps = {name: args.tokens / statistics.median(times[2:]) for name, times in seconds.items()}
    ratio = tps["moe"] / tps["dense"]
    active = sum(p.numel() for p in dense.parameters())
    print(
        json.dumps(
            {
                "benchmark": "moe_throughput",
                "level": "block",
                "num_experts": NUM_EXPERTS,
                "top_k": TOP_K,
                "tokens": args.tokens,
                "hidden": args.hidden,
                "expert_dim": args.expert_dim,
                "active_parameters_dense": active,
                "active_parameters_moe": active + NUM_EXPERTS * args.hidden,
                "total_parameters_moe": sum(p.numel() for p in moe.parameters()),
                "timed_rounds": args.rounds - 2,
                "torch_threads": torch.get_num_threads(),
                **{f"{name}_tokens_per_s": round(value, 1) for name, value in tps.items()},
                "ratio_moe_vs_dense": round(ratio, 4),
                "ratio_moe_vs_hf_expert_loop": round(tps["moe"] / tps["hf_expert_loop"], 4),
                "ratio_moe_vs_hf_grouped_mm": round(tps["moe"] / tps["hf_grouped_mm"], 4),
                "ratio_moe_vs_padded_capacity_bmm": round(tps["moe"] / tps["padded_capacity_bmm"], 4),
                "goal_ratio": GOAL,
                "meets_goal": ratio >= GOAL,
                "load_average": [round(v, 2) for v in os.getloadavg()],
            }
        )
    )


if __name__ == "__main__":
    main()
