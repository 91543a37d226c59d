"""Llama: pre-norm blocks of grouped-query attention and a SwiGLU feed-forward (HF `LlamaForCausalLM`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from marin.training.models.base import register
from marin.training.models.decoder import DecoderConfig
from marin.training.models.hf import DecoderHF


@register
@dataclass(frozen=True)
class LlamaConfig(DecoderConfig):
    """The shape of a Llama model (the fields are `DecoderConfig`'s; see there)."""

    architecture: ClassVar[str] = "llama"
    hf: ClassVar[DecoderHF] = DecoderHF("llama", "LlamaForCausalLM", "LlamaConfig")
    # keyed even at their defaults: these keys were published before defaults stayed out (marin.execution.keyed)
    KEYED_AT_DEFAULT: ClassVar[tuple[str, ...]] = (
        "num_kv_heads",
        "max_seq_len",
        "vocab_size",
        "rope_theta",
        "norm_eps",
        "tie_embeddings",
        "init_std",
        "output_multiplier",
    )
