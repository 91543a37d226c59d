"""Qwen3: Llama's pre-norm blocks with QK-norm (each head's query and key RMS-normalized before RoPE),
grouped-query attention, an explicit head width and optionally tied embeddings (HF `Qwen3ForCausalLM`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from marin.training.errors import TrainingConfigError
from marin.training.models.base import register
from marin.training.models.decoder import DecoderConfig
from marin.training.models.hf import DecoderHF
from marin.training.models.layers import QKNorm


class Qwen3HF(DecoderHF):
    """Qwen3's config.json: the decoder fields, full attention on every layer (no sliding window)."""

    def config_kwargs(self, config: Any) -> dict[str, Any]:
        return super().config_kwargs(config) | {"use_sliding_window": False}

    def from_config_json(self, hf: Mapping[str, Any]) -> Any:
        if hf.get("use_sliding_window"):
            raise TrainingConfigError(
                "Hugging Face qwen3 config uses sliding-window attention; ours attends to all"
            )
        return super().from_config_json(hf)


@register
@dataclass(frozen=True)
class Qwen3Config(DecoderConfig):
    """The shape of a Qwen3 model: `DecoderConfig`'s fields with Qwen3's defaults (RoPE theta 1e6,
    RMSNorm eps 1e-6). `head_dim` may differ from `hidden_dim // num_heads` (Qwen3 uses 128)."""

    architecture: ClassVar[str] = "qwen3"
    hf: ClassVar[DecoderHF] = Qwen3HF("qwen3", "Qwen3ForCausalLM", "Qwen3Config")
    QK_NORM: ClassVar[QKNorm] = QKNorm.HEAD

    rope_theta: float = 1_000_000.0
    norm_eps: float = 1e-6
