"""Generation: the batched, KV-cached sampler against the window-recomputing one it replaced (issue 22).

A random Llama export (4 layers, width 128, 256-token context; `eval_perplexity.build_export`) greedily
continues `--prompts` story openings by `--new-tokens` tokens each: once through `generate_samples`
(every prompt in one batch, one token per step fed against the model's key/value cache) and once
through `samples._continue` prompt by prompt (the model run over the whole window for every new
token, as before), interleaved, best of `--rounds`. Goal: >= 5x, the same greedy text.

Prints one JSON object: tokens/s of each, the ratio, and whether every text is the same.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fresh import load_average  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from eval_perplexity import build_export

    from marin.data.corpus import CORPUS_SIZE, stories
    from marin.evaluation.checkpoint import load_hf_model
    from marin.evaluation.samples import SamplingConfig, _continue, generate_samples

    prompts = [" ".join(str(s).split()[:8]) for s in stories(CORPUS_SIZE - args.prompts, CORPUS_SIZE)]
    folder = tempfile.mkdtemp(prefix="eval-generation-")
    build_export(folder)
    loaded = load_hf_model(folder)
    config = SamplingConfig(max_new_tokens=args.new_tokens, num_samples=0)
    eos = loaded.tokenizer.eos_token_id

    def batched() -> list[str]:
        return [
            r["text"]
            for r in generate_samples(loaded.model, loaded.tokenizer, prompts, config, loaded.max_length)
        ]

    def window() -> list[str]:
        out = []
        for prompt in prompts:
            ids = loaded.tokenizer.encode(prompt, add_special_tokens=False)
            out.append(
                loaded.tokenizer.decode(_continue(loaded.model, ids, config, loaded.max_length, eos, None))
            )
        return out

    best = {"batched": float("inf"), "window": float("inf")}
    texts = {}
    for _ in range(args.rounds):
        for name, fn in (("batched", batched), ("window", window)):
            start = time.perf_counter()
            texts[name] = fn()
            best[name] = min(best[name], time.perf_counter() - start)
    tokens = args.prompts * args.new_tokens
    ratio = best["window"] / best["batched"]
    same = texts["batched"] == texts["window"]
    print(
        json.dumps(
            {
                "benchmark": "eval_generation",
                "prompts": args.prompts,
                "new_tokens": args.new_tokens,
                "batched_tokens_per_s": round(tokens / best["batched"], 1),
                "window_tokens_per_s": round(tokens / best["window"], 1),
                "speedup": round(ratio, 2),
                "same_greedy_text": same,
                "goal": ">= 5x, the same greedy text",
                "goal_met": ratio >= 5 and same,
                "load_average": load_average(),
            }
        )
    )


if __name__ == "__main__":
    main()
