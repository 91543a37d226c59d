"""The shared building blocks of every architecture: RMSNorm, rotary embeddings, attention, SwiGLU, the loss.

Parameter names follow Hugging Face's (`q_proj`, `k_proj`, `v_proj`, `o_proj`, `q_norm`, `k_norm`,
`gate_proj`, `up_proj`, `down_proj`), and RoPE uses its rotate-half layout, so an architecture's
export is a rename. Each part is built from a small frozen config (`AttentionConfig.build()`,
`SwiGLUConfig.build()`), as OLMo-core's are: an architecture is a choice of parts, and a
mixture-of-experts is another feed-forward config, not another model.

Where the recipes that change attention or the loss live (each in one place, for every architecture):
- document masking with position restarts: `rope_tables` takes the positions (restarting at each
  document), and `Attention.attend` is the one call of the attention kernel, which takes the
  block-diagonal `DocumentMask` (`marin.training.document_masking`);
- a KV cache for generation (`KVCache`): `Attention.forward` appends each step's rotated keys and
  values to the cache between the projections and `attend`, and attends under the cache's mask;
  `Decoder.forward(tokens, cache=...)` continues each row's positions where its tokens left off;
- a z-loss on the logits: `causal_lm_loss_with_z`, the one loss of every architecture with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn

from marin.training.document_masking import DocumentMask, document_attention

IGNORE_INDEX = -100  # a target equal to this is not predicted (padding, prompts, masked documents)


class RMSNorm(nn.Module):
    """Root-mean-square layer norm, normalized in float32 like Hugging Face's LlamaRMSNorm."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rope_tables(head_dim: int, positions: torch.Tensor, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of shape (*positions.shape, head_dim) in float32, halves repeated (rotate-half layout).

    `positions` is `torch.arange(seq_len)` for one causal sequence; any integer tensor works (a
    batch of positions that restart at each document broadcasts over the heads as (batch, 1, seq, dim)).
    """
    device = positions.device
    inv_freq = 1.0 / (
        theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64, device=device).float() / head_dim)
    )
    freqs = positions.to(torch.float32).unsqueeze(-1) * inv_freq
    angles = torch.cat((freqs, freqs), dim=-1)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate (batch, heads, seq, head_dim) by position: x·cos + rotate_half(x)·sin."""
    first, second = x.chunk(2, dim=-1)
    rotated = torch.cat((-second, first), dim=-1)
    return (x * cos + rotated * sin).to(x.dtype)


@dataclass
class KVCache:
    """The rotated keys and values of every position fed so far, per layer, for generation.

    Feeding a prompt and then one token at a time through `Decoder.forward(tokens, cache=cache)`
    computes what the whole window would, while each step projects only the new tokens. Rows may
    start with padding (prompts of different lengths, left-padded): `forward`'s `valid` marks the
    real tokens, which alone are attended to and counted in positions, so each row is computed as
    if it were alone. `mask` (batch, cached) says which cached positions are real, `lengths`
    (batch,) how many real tokens each row has (the next one's position), `step_mask` (batch, 1,
    new, cached) which keys each new token attends to in the step being computed.
    """

    num_layers: int
    keys: list[torch.Tensor | None] = field(default_factory=list)
    values: list[torch.Tensor | None] = field(default_factory=list)
    mask: torch.Tensor | None = None
    lengths: torch.Tensor | None = None
    step_mask: torch.Tensor | None = None

    def __post_init__(self) -> None:
        self.keys = self.keys or [None] * self.num_layers
        self.values = self.values or [None] * self.num_layers

    @property
    def length(self) -> int:
        """Positions cached so far (padding included)."""
        return 0 if self.mask is None else self.mask.shape[1]

    def begin(self, valid: torch.Tensor) -> torch.Tensor:
        """Start a step of (batch, new) tokens, `valid` True for real ones: their positions, and
        `step_mask` set so each new token attends to the real cached and new tokens up to itself
        (and to itself, so a padding token's row of attention is never empty)."""
        b, t = valid.shape
        if self.mask is None:
            self.mask = valid.new_zeros((b, 0))
            self.lengths = torch.zeros(b, dtype=torch.long, device=valid.device)
        past = self.length
        positions = (self.lengths[:, None] + valid.long().cumsum(-1) - 1).clamp(min=0)
        self.mask = torch.cat([self.mask, valid], dim=1)
        self.lengths = self.lengths + valid.long().sum(-1)
        query = torch.arange(past, past + t, device=valid.device)[:, None]
        key = torch.arange(past + t, device=valid.device)[None, :]
        self.step_mask = ((key <= query) & self.mask[:, None, :] | (key == query))[:, None]
        return positions

    def begin_one(self) -> torch.Tensor:
        """`begin` for a step of one real token per row after the first step (the decoding loop's):
        the same positions and mask, without building them from a `valid` of all True."""
        positions = self.lengths[:, None]
        self.mask = torch.cat([self.mask, self.mask.new_ones((self.mask.shape[0], 1))], dim=1)
        self.lengths = self.lengths + 1
        self.step_mask = self.mask[:, None, None, :]  # every real key, the new token's own included
        return positions

    def layer(self, index: int) -> LayerCache:
        """Layer `index`'s view of the cache (what its attention is given)."""
        return LayerCache(self, index)


@dataclass(frozen=True)
class LayerCache:
    """One layer's part of a `KVCache`: `update` appends the step's keys and values and returns all."""

    cache: KVCache
    index: int

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append (batch, kv_heads, new, head_dim) `k` and `v`; return the cached ones with them."""
        i, c = self.index, self.cache
        if c.keys[i] is not None:
            k, v = torch.cat([c.keys[i], k], dim=2), torch.cat([c.values[i], v], dim=2)
        c.keys[i], c.values[i] = k, v
        return k, v

    @property
    def step_mask(self) -> torch.Tensor:
        return self.cache.step_mask


class QKNorm(StrEnum):
    """Where attention normalizes its queries and keys (RMSNorm, before RoPE).

    NONE: not at all (Llama). HEAD: each head's vector, one weight of head_dim shared by the heads
    (Qwen3). FULL: the whole projection, one weight per output unit (OLMo 2).
    """

    NONE = "none"
    HEAD = "head"
    FULL = "full"


@dataclass(frozen=True)
class AttentionConfig:
    """Causal self-attention with grouped-query heads, optional QK-norm, RoPE."""

    hidden_dim: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    qk_norm: QKNorm = QKNorm.NONE
    norm_eps: float = 1e-5

    def build(self) -> Attention:
        return Attention(self)

    def num_parameters(self) -> int:
        """Every parameter: the four projections and the QK-norm weights."""
        return self.matmul_parameters() + self.norm_parameters()

    def matmul_parameters(self) -> int:
        """The weights that take part in matrix multiplies (q, k, v, o)."""
        q, kv = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        return 2 * self.hidden_dim * q + 2 * self.hidden_dim * kv

    def norm_parameters(self) -> int:
        q, kv = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        return {QKNorm.NONE: 0, QKNorm.HEAD: 2 * self.head_dim, QKNorm.FULL: q + kv}[self.qk_norm]


class Attention(nn.Module):
    """Causal grouped-query self-attention through `scaled_dot_product_attention`."""

    def __init__(self, config: AttentionConfig):
        super().__init__()
        self.num_heads, self.kv_heads, self.head_dim = config.num_heads, config.num_kv_heads, config.head_dim
        self.qk_norm = config.qk_norm
        d, q, kv = (
            config.hidden_dim,
            config.num_heads * config.head_dim,
            config.num_kv_heads * config.head_dim,
        )
        self.q_proj = nn.Linear(d, q, bias=False)
        self.k_proj = nn.Linear(d, kv, bias=False)
        self.v_proj = nn.Linear(d, kv, bias=False)
        self.o_proj = nn.Linear(q, d, bias=False)
        if config.qk_norm == QKNorm.HEAD:
            self.q_norm = RMSNorm(config.head_dim, config.norm_eps)
            self.k_norm = RMSNorm(config.head_dim, config.norm_eps)
        elif config.qk_norm == QKNorm.FULL:
            self.q_norm = RMSNorm(q, config.norm_eps)
            self.k_norm = RMSNorm(kv, config.norm_eps)

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        documents: DocumentMask | None = None,
        cache: LayerCache | None = None,
    ) -> torch.Tensor:
        """Attention of (batch, seq, hidden) `x`, rotated by `cos`/`sin`; within documents when given;
        over the cached keys and values too, under the cache's mask, when `cache` is given."""
        b, t, _ = x.shape
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        if self.qk_norm == QKNorm.FULL:
            q, k = self.q_norm(q), self.k_norm(k)
        q = q.view(b, t, self.num_heads, self.head_dim)
        k = k.view(b, t, self.kv_heads, self.head_dim)
        if self.qk_norm == QKNorm.HEAD:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        v = v.view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if cache is not None:
            k, v = cache.update(k, v)
            y = self.attend_masked(q, k, v, cache.step_mask)
        else:
            y = self.attend(q, k, v, documents)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, self.num_heads * self.head_dim))

    def attend(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, documents: DocumentMask | None = None
    ) -> torch.Tensor:
        """Causal attention of (batch, heads, seq, head_dim) queries over grouped keys and values,
        within each document when `documents` is given (`marin.training.document_masking`).

        Without documents on CUDA, the kernel shares each key/value head with its group of query
        heads (`enable_gqa`, nothing copied); otherwise the heads are repeated first, which gives
        the same forward and keeps the CPU gradients bit-identical to the earlier trainer's (the
        two sum a group's gradients in different orders)."""
        grouped = self.kv_heads != self.num_heads
        if documents is None and grouped and q.is_cuda:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        if grouped:
            repeat = self.num_heads // self.kv_heads
            k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
        if documents is None:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return document_attention(q, k, v, documents)

    def attend_masked(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        """Attention of the new queries over every key the boolean `mask` (batch, 1, queries, keys)
        allows (a KV cache's step: new queries, cached and new keys)."""
        if self.kv_heads != self.num_heads:
            repeat = self.num_heads // self.kv_heads
            k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class FeedForwardConfig(Protocol):
    """A feed-forward part: what every block's `mlp` is built from.

    `build()` returns a module whose forward takes (batch, seq, hidden) and returns the same shape,
    or `(output, aux_losses)` where `aux_losses` maps names to scalar losses, already weighted, that
    the trainer adds to the objective (a mixture-of-experts' load balance and router z-loss).
    """

    def build(self) -> nn.Module: ...

    def num_parameters(self) -> int: ...

    def matmul_parameters(self) -> int:
        """The weights one token multiplies by (a mixture-of-experts counts its active experts)."""
        ...


@dataclass(frozen=True)
class SwiGLUConfig:
    """The SwiGLU feed-forward: down(silu(gate(x)) * up(x))."""

    hidden_dim: int
    intermediate_dim: int

    def build(self) -> SwiGLU:
        return SwiGLU(self)

    def num_parameters(self) -> int:
        return 3 * self.hidden_dim * self.intermediate_dim

    def matmul_parameters(self) -> int:
        return self.num_parameters()


class SwiGLU(nn.Module):
    """SwiGLU feed-forward: down(silu(gate(x)) * up(x))."""

    def __init__(self, config: SwiGLUConfig):
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_dim, config.intermediate_dim, bias=False)
        self.up_proj = nn.Linear(config.hidden_dim, config.intermediate_dim, bias=False)
        self.down_proj = nn.Linear(config.intermediate_dim, config.hidden_dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def causal_lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy (nats) of (batch, seq, vocab) logits against (batch, seq) targets,
    in float32, over the targets not equal to IGNORE_INDEX. Every architecture's one loss."""
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=IGNORE_INDEX)


def causal_lm_loss_with_z(
    logits: torch.Tensor, targets: torch.Tensor, coefficient: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """`causal_lm_loss` and the z-loss `coefficient · mean(log² Z)` over the same targets, Z each
    position's softmax normaliser (PaLM, section 5), from one log-sum-exp over the vocabulary.

    The z-loss keeps the logits' normaliser near 1 (log Z near 0), which keeps bf16 logits precise
    and large runs stable; the trainer adds it to the objective and logs it as `z_loss`."""
    flat = logits.flatten(0, 1).float()
    wanted = targets.flatten()
    kept = wanted != IGNORE_INDEX
    log_z = torch.logsumexp(flat, dim=-1)
    picked = flat.gather(1, wanted.clamp(min=0).unsqueeze(1)).squeeze(1)
    count = kept.sum().clamp(min=1)
    loss = ((log_z - picked) * kept).sum() / count
    return loss, coefficient * (log_z.square() * kept).sum() / count
