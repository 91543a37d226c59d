"""A real, tiny Hugging Face export built in the test session: byte-level BPE tokenizer trained on
generated stories, and a randomly initialised Llama with a short context. Nothing is downloaded."""

from __future__ import annotations

import random
from pathlib import Path

NAMES = ["Mia", "Tom", "Zoë", "Ben", "Lily", "José"]
THINGS = ["red ball", "small boat", "kite", "blue cup", "crème cake", "old map"]
PLACES = ["park", "garden", "river", "forest", "café", "beach"]
FEELINGS = ["happy", "sad", "brave", "sleepy", "curious"]


def story(seed: int) -> str:
    """A short story of 4-9 sentences, deterministic in `seed`, with some non-ASCII letters."""
    rng = random.Random(seed)
    name, friend = rng.sample(NAMES, 2)
    sentences = [f"Once upon a time, {name} lived near the {rng.choice(PLACES)}."]
    for _ in range(rng.randint(3, 8)):
        sentences.append(rng.choice([
            f"{name} found a {rng.choice(THINGS)} by the {rng.choice(PLACES)}.",
            f"{friend} felt {rng.choice(FEELINGS)} and said hello.",
            f"They played with the {rng.choice(THINGS)} all day.",
            f"The sun was warm, and {name} was {rng.choice(FEELINGS)}.",
        ]))
    sentences.append(f"In the end, {name} and {friend} went home {rng.choice(FEELINGS)}.")
    return " ".join(sentences)


def build_tiny_export(out_dir: Path, context: int = 48, seed: int = 0) -> Path:
    """Write tokenizer + model files that AutoTokenizer / AutoModelForCausalLM load from `out_dir`."""
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator([story(i) for i in range(300)], vocab_size=400, min_frequency=2,
                            special_tokens=["<|endoftext|>"], show_progress=False)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, eos_token="<|endoftext|>",
                                        pad_token="<|endoftext|>")
    tokenizer.save_pretrained(out_dir)
    eos = tokenizer.eos_token_id
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=context,
                         eos_token_id=eos, bos_token_id=eos, pad_token_id=eos,
                         initializer_range=0.2)  # far from uniform, so scores really differ per token
    torch.manual_seed(seed)
    LlamaForCausalLM(config).save_pretrained(out_dir)
    return out_dir
