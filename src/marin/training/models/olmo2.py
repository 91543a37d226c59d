"""OLMo 2: norms after each sublayer (`x + norm(attn(x))`, `x + norm(mlp(x))`) and QK-norm over the whole
query and key projections, before RoPE (HF `Olmo2ForCausalLM`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from marin.training.models.base import register
from marin.training.models.decoder import DecoderConfig, NormPlacement
from marin.training.models.hf import DecoderHF
from marin.training.models.layers import QKNorm


@register
@dataclass(frozen=True)
class Olmo2Config(DecoderConfig):
    """The shape of an OLMo 2 model: `DecoderConfig`'s fields with OLMo 2's defaults (RoPE theta
    500,000, RMSNorm eps 1e-6)."""

    architecture: ClassVar[str] = "olmo2"
    hf: ClassVar[DecoderHF] = DecoderHF("olmo2", "Olmo2ForCausalLM", "Olmo2Config")
    QK_NORM: ClassVar[QKNorm] = QKNorm.FULL
    NORM_PLACEMENT: ClassVar[NormPlacement] = NormPlacement.POST

    rope_theta: float = 500_000.0
    norm_eps: float = 1e-6
