"""Harness generation: our own layers' batched KV-cached generator against the harness's Hugging Face path
(issue 35: >= 3x on CPU for a nano model, 64 prompts x 64 tokens, the same text).

A nano Llama (`experiments/llama.py`'s `llama_nano`: 2 layers, width 32, its logits scaled by 8),
random weights, with a byte-level BPE of 1,024 ids trained on the corpus, exported as a train step
exports it. `--prompts` story openings are continued greedily by `--new-tokens` tokens each, as
harness `generate_until` requests with no stop string but EOS: once through lm-eval's
`HFLM.generate_until` (transformers' `generate`), once through `marin.evaluation.generation`
with `marin.training.generate` (what an evaluation of a model we trained uses), interleaved, best of
`--rounds`. Prints one JSON object: tokens/s of each, the ratio, and whether every text is the same.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fresh import load_average  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import dataclasses

    import torch
    from lm_eval.models.huggingface import HFLM
    from transformers import AutoTokenizer

    from experiments.llama import llama_nano
    from marin.data.corpus import CORPUS_SIZE, stories
    from marin.data.tokenizer_training import train_byte_level_bpe
    from marin.evaluation.checkpoint import load_hf_model
    from marin.evaluation.generation import generate_until
    from marin.evaluation.perplexity import prefix_token_id
    from marin.experiment.own_generation import load_generator
    from marin.training.export import export_hf

    folder = tempfile.mkdtemp(prefix="eval-own-generation-")
    tokenizer_dir = os.path.join(folder, "tokenizer")
    train_byte_level_bpe(stories(0, 2000), 1024, tokenizer_dir)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = dataclasses.replace(llama_nano, vocab_size=len(tokenizer), max_seq_len=256)
    torch.manual_seed(0)
    export_hf(
        config.build(),
        config,
        os.path.join(folder, "hf"),
        tokenizer_dir=tokenizer_dir,
        eos_id=tokenizer.eos_token_id,
    )
    loaded = load_hf_model(os.path.join(folder, "hf"))
    lm = HFLM(
        pretrained=loaded.model,
        tokenizer=loaded.tokenizer,
        batch_size=args.prompts,
        add_bos_token=False,
        prefix_token_id=prefix_token_id(loaded.tokenizer),
    )
    ours = load_generator(os.path.join(folder, "hf"), "cpu")
    prompts = [" ".join(str(s).split()[:8]) for s in stories(CORPUS_SIZE - args.prompts, CORPUS_SIZE)]
    settings = {"until": [], "do_sample": False, "max_gen_toks": args.new_tokens}
    requests = [(p, dict(settings)) for p in prompts]

    class Request:  # what HFLM reads of an lm-eval Instance
        def __init__(self, request):
            self.args = request

    def hf() -> list[str]:
        return lm.generate_until([Request(r) for r in requests], disable_tqdm=True)

    def marin() -> list[str]:
        return generate_until(lm, ours, requests, args.prompts)

    best = {"hf": float("inf"), "marin": float("inf")}
    texts: dict[str, list[str]] = {}
    for _ in range(args.rounds):
        for name, fn in (("hf", hf), ("marin", marin)):
            start = time.perf_counter()
            texts[name] = fn()
            best[name] = min(best[name], time.perf_counter() - start)
    tokens = args.prompts * args.new_tokens
    ratio = best["hf"] / best["marin"]
    same = texts["hf"] == texts["marin"]
    print(
        json.dumps(
            {
                "benchmark": "eval_own_generation",
                "prompts": args.prompts,
                "new_tokens": args.new_tokens,
                "marin_tokens_per_s": round(tokens / best["marin"], 1),
                "hf_tokens_per_s": round(tokens / best["hf"], 1),
                "speedup": round(ratio, 2),
                "same_greedy_text": same,
                "torch_threads": torch.get_num_threads(),
                "mean_chars": round(sum(map(len, texts["marin"])) / len(prompts), 1),
                "goal": ">= 3x, the same greedy text",
                "goal_met": ratio >= 3 and same,
                "load_average": load_average(),
            }
        )
    )


if __name__ == "__main__":
    main()
