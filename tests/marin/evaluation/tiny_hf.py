"""A real, tiny Hugging Face export built in the test session from the project's own pieces: a
byte-level BPE trained on the embedded story corpus, and a randomly initialised Llama with a short
context. Nothing is downloaded."""

from __future__ import annotations

from pathlib import Path

from marin.data.corpus import stories
from marin.data.tokenizer_training import train_byte_level_bpe


def held_out_stories(count: int, start: int = 40_000) -> list[str]:
    """Corpus stories far from the ones the tokenizer was trained on."""
    return list(stories(start, start + count))


def build_tiny_export(
    out_dir: Path, context: int = 48, seed: int = 0, vocab_size: int = 400, width: int = 32, layers: int = 2
) -> Path:
    """Write tokenizer + model files that AutoTokenizer / AutoModelForCausalLM load from `out_dir`: a
    byte-level BPE of `vocab_size` and a Llama `width` wide and `layers` deep."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    train_byte_level_bpe(stories(0, 300), vocab_size, str(out_dir))
    tokenizer = AutoTokenizer.from_pretrained(out_dir)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=width,
        intermediate_size=2 * width,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=context,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        initializer_range=0.2,
    )  # far from uniform, so scores really differ per token
    torch.manual_seed(seed)
    LlamaForCausalLM(config).save_pretrained(out_dir)
    return out_dir
