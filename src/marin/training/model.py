"""A readable Llama decoder: RMSNorm, rotary position embeddings, SwiGLU, grouped-query attention.

The parameter names and layouts follow Hugging Face's `LlamaForCausalLM` (without its `model.`
prefix), and RoPE uses its rotate-half convention, so exporting is a rename and nothing else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from marin.training.errors import TrainingConfigError


@dataclass(frozen=True)
class LlamaConfig:
    """The shape of a Llama model.

    `vocab_size=None` means "the tokenizer's vocabulary": the trainer resolves it from the token
    cache before building the model (see `with_vocab_size`). `max_seq_len` is the longest sequence
    the model trains on; RoPE itself has no table to outgrow, but the trainer refuses longer ones.

    `output_multiplier` α scales the logits (`α · lm_head(h)`), with `lm_head` initialised α times
    smaller so the initial logits do not change. Under Adam, which moves each weight by about the
    learning rate per step whatever its scale, this multiplies the output layer's effective learning
    rate by α. Tiny models need it: with a unit-RMS final hidden state of width d, each logit can
    move only about d · lr per step, which for d = 32 and lr = 6e-4 is too little to learn even the
    unigram distribution in 100 steps. The export folds α into the output weights.
    """

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

    hidden_dim: int
    intermediate_dim: int
    num_layers: int
    num_heads: int
    num_kv_heads: int | None = None
    max_seq_len: int = 2048
    vocab_size: int | None = None
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    tie_embeddings: bool = False
    init_std: float = 0.02
    output_multiplier: float = 1.0

    def __post_init__(self) -> None:
        for name in ("hidden_dim", "intermediate_dim", "num_layers", "num_heads", "max_seq_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise TrainingConfigError(f"LlamaConfig.{name} must be a positive int, got {value!r}")
        if self.hidden_dim % self.num_heads:
            raise TrainingConfigError(
                f"LlamaConfig.hidden_dim={self.hidden_dim} is not divisible by num_heads={self.num_heads}"
            )
        if self.head_dim % 2:
            raise TrainingConfigError(f"LlamaConfig: head_dim={self.head_dim} must be even for RoPE")
        if self.num_heads % self.kv_heads:
            raise TrainingConfigError(
                f"LlamaConfig.num_heads={self.num_heads} is not a multiple of num_kv_heads={self.kv_heads}"
            )
        if not self.output_multiplier > 0:
            raise TrainingConfigError(
                f"LlamaConfig.output_multiplier must be > 0, got {self.output_multiplier!r}"
            )
        if self.tie_embeddings and self.output_multiplier != 1.0:
            raise TrainingConfigError(
                "LlamaConfig.output_multiplier needs untied embeddings (tie_embeddings=False): the export "
                "folds it into the output weights"
            )
        if self.vocab_size is not None and (not isinstance(self.vocab_size, int) or self.vocab_size <= 0):
            raise TrainingConfigError(
                f"LlamaConfig.vocab_size must be a positive int or None, got {self.vocab_size!r}"
            )

    @property
    def head_dim(self) -> int:
        return self.hidden_dim // self.num_heads

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads or self.num_heads

    def with_vocab_size(self, vocab_size: int) -> LlamaConfig:
        """This config with `vocab_size` filled in (used when it was left to the tokenizer)."""
        return replace(self, vocab_size=vocab_size)

    def num_parameters(self, vocab_size: int | None = None, *, include_embeddings: bool = True) -> int:
        """The parameter count, computed from the shapes (matches `sum(p.numel())` of the module)."""
        vocab = vocab_size if vocab_size is not None else self.vocab_size
        if vocab is None and include_embeddings:
            raise TrainingConfigError(
                "num_parameters needs a vocab_size: the config leaves it to the tokenizer"
            )
        d, f, kv = self.hidden_dim, self.intermediate_dim, self.kv_heads * self.head_dim
        attention = d * d * 2 + d * kv * 2
        mlp = 3 * d * f
        per_layer = attention + mlp + 2 * d
        body = self.num_layers * per_layer + d
        if not include_embeddings:
            return body
        return body + vocab * d * (1 if self.tie_embeddings else 2)

    def flops_per_token(self, seq_len: int) -> float:
        """Training FLOPs per token: 6·N_matmul + 12·L·H·Q·T (PaLM appendix B).

        N_matmul counts the weights that take part in matrix multiplies (every parameter except the
        input embedding table and the norms; with tied embeddings the table is the output matmul).
        The attention term 12·L·H·Q·T is the score and value matmuls, forward and backward, with
        H·Q = hidden_dim and T = seq_len; as is customary it ignores causal masking.
        """
        if self.vocab_size is None:
            raise TrainingConfigError("flops_per_token needs a resolved vocab_size")
        matmul = self.num_parameters(include_embeddings=False) - (2 * self.num_layers + 1) * self.hidden_dim
        matmul += self.vocab_size * self.hidden_dim
        return 6.0 * matmul + 12.0 * self.num_layers * self.hidden_dim * seq_len


class RMSNorm(nn.Module):
    """Root-mean-square layer norm, computed in float32 like Hugging Face's LlamaRMSNorm."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rope_tables(
    head_dim: int, seq_len: int, theta: float, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of shape (seq_len, head_dim) in float32, halves repeated (rotate-half layout)."""
    inv_freq = 1.0 / (
        theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64, device=device).float() / head_dim)
    )
    positions = torch.arange(seq_len, device=device, dtype=torch.float32)
    freqs = torch.outer(positions, inv_freq)
    angles = torch.cat((freqs, freqs), dim=-1)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate (batch, heads, seq, head_dim) by position: x·cos + rotate_half(x)·sin."""
    first, second = x.chunk(2, dim=-1)
    rotated = torch.cat((-second, first), dim=-1)
    return (x * cos + rotated * sin).to(x.dtype)


class Attention(nn.Module):
    """Causal grouped-query self-attention through `scaled_dot_product_attention`."""

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.num_heads, self.kv_heads, self.head_dim = config.num_heads, config.kv_heads, config.head_dim
        d = config.hidden_dim
        self.q_proj = nn.Linear(d, self.num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(d, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, d, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if self.kv_heads != self.num_heads:
            repeat = self.num_heads // self.kv_heads
            k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, self.num_heads * self.head_dim))


class MLP(nn.Module):
    """SwiGLU feed-forward: down(silu(gate(x)) * up(x))."""

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_dim, config.intermediate_dim, bias=False)
        self.up_proj = nn.Linear(config.hidden_dim, config.intermediate_dim, bias=False)
        self.down_proj = nn.Linear(config.intermediate_dim, config.hidden_dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    """One pre-norm transformer layer."""

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_dim, config.norm_eps)
        self.self_attn = Attention(config)
        self.post_attention_layernorm = RMSNorm(config.hidden_dim, config.norm_eps)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    """The decoder: token embedding, `num_layers` blocks, final norm, output projection."""

    def __init__(self, config: LlamaConfig):
        super().__init__()
        if config.vocab_size is None:
            raise TrainingConfigError(
                "Llama needs a resolved vocab_size; call config.with_vocab_size(tokenizer size)"
            )
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_dim)
        self.layers = nn.ModuleList(Block(config) for _ in range(config.num_layers))
        self.norm = RMSNorm(config.hidden_dim, config.norm_eps)
        self.lm_head = nn.Linear(config.hidden_dim, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Normal(0, init_std) weights; residual output projections scaled by 1/sqrt(2·layers) (GPT-2)."""
        std = self.config.init_std
        residual_std = std / math.sqrt(2 * self.config.num_layers)
        for name, param in self.named_parameters():
            if param.dim() == 1:
                nn.init.ones_(param)
            elif name.endswith(("o_proj.weight", "down_proj.weight")):
                nn.init.normal_(param, mean=0.0, std=residual_std)
            elif name == "lm_head.weight" and not self.config.tie_embeddings:
                nn.init.normal_(param, mean=0.0, std=std / self.config.output_multiplier)
            else:
                nn.init.normal_(param, mean=0.0, std=std)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits of shape (batch, seq, vocab) for `tokens` of shape (batch, seq)."""
        t = tokens.shape[1]
        cos, sin = rope_tables(self.config.head_dim, t, self.config.rope_theta, tokens.device)
        x = self.embed_tokens(tokens)
        for layer in self.layers:
            x = layer(x, cos.to(x.dtype), sin.to(x.dtype))
        logits = self.lm_head(self.norm(x))
        return logits if self.config.output_multiplier == 1.0 else logits * self.config.output_multiplier
