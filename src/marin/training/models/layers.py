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
- a KV cache for generation (`KVCache`): `Attention.forward` writes each step's rotated keys and
  values into the cache's preallocated buffers between the projections and `attend`, and attends under the cache's mask;
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
    if it were alone.

    The buffers are allocated once, for `capacity` positions (more when a step needs them), and each
    step writes its keys and values in place: a decoding step then costs the model's own work, not
    a copy of the whole cache per layer. `mask` (batch, capacity) says which positions are real
    (positions not fed yet count as real: every token after the prompt is), `lengths` (batch,) how
    many real tokens each row has (the next one's position), `length` how many positions were fed
    (padding included), `step_mask` (batch, 1, new, length) which keys each new token of a step of
    several attends to; a step of one token per row attends to every real key (`attention_mask`).
    """

    num_layers: int
    capacity: int = 0
    keys: list[torch.Tensor | None] = field(default_factory=list)
    values: list[torch.Tensor | None] = field(default_factory=list)
    mask: torch.Tensor | None = None
    lengths: torch.Tensor | None = None
    length: int = 0
    step_mask: torch.Tensor | None = None
    _rope: tuple[torch.Tensor, torch.Tensor] | None = field(default=None, repr=False)
    _bias: dict[torch.dtype, torch.Tensor] = field(default_factory=dict, repr=False)
    _projections: dict[int, torch.Tensor] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.keys = self.keys or [None] * self.num_layers
        self.values = self.values or [None] * self.num_layers

    def _reserve(self, batch: int, positions: int, device: torch.device) -> None:
        """Room for `positions` positions: the mask allocated or grown (the layers' buffers grow in
        `LayerCache.update`), at least doubling so that growing one token at a time stays linear."""
        if self.mask is None:
            self.capacity = max(self.capacity, positions)
            self.mask = torch.ones((batch, self.capacity), dtype=torch.bool, device=device)
            self.lengths = torch.zeros(batch, dtype=torch.long, device=device)
        elif positions > self.capacity:
            grown = max(positions, 2 * self.capacity)
            extra = self.mask.new_ones((batch, grown - self.capacity))
            self.mask, self.capacity = torch.cat([self.mask, extra], dim=1), grown
            self._bias.clear()

    def begin(self, valid: torch.Tensor) -> torch.Tensor:
        """Start a step of (batch, new) tokens, `valid` True for real ones: their positions, and
        `step_mask` set so each new token attends to the real cached and new tokens up to itself
        (and to itself, so a padding token's row of attention is never empty)."""
        b, t = valid.shape
        past = self.length
        self._reserve(b, past + t, valid.device)
        positions = (self.lengths[:, None] + valid.long().cumsum(-1) - 1).clamp(min=0)
        self.mask[:, past : past + t] = valid
        self._bias.clear()
        self.lengths = self.lengths + valid.long().sum(-1)
        self.length = past + t
        query = torch.arange(past, past + t, device=valid.device)[:, None]
        key = torch.arange(past + t, device=valid.device)[None, :]
        self.step_mask = ((key <= query) & self.mask[:, None, : past + t] | (key == query))[:, None]
        return positions

    def begin_one(self) -> torch.Tensor:
        """`begin` for a step of one real token per row after the first step (the decoding loop's):
        the same positions, and the mask of every real key (the new token's own included)."""
        self._reserve(self.mask.shape[0], self.length + 1, self.mask.device)
        positions = self.lengths[:, None]
        self.lengths = self.lengths + 1
        self.length += 1
        self.step_mask = None
        return positions

    def attention_mask(self, dtype: torch.dtype) -> torch.Tensor:
        """What a layer's attention of this step is masked with: `step_mask`, or for a step of one
        token per row the real keys as an additive mask (0 or -inf) in the queries' `dtype`, made
        once for the steps that follow (the kernel would otherwise convert a boolean one per layer)."""
        if self.step_mask is not None:
            return self.step_mask
        bias = self._bias.get(dtype)
        if bias is None:
            bias = torch.zeros(self.mask.shape, dtype=dtype, device=self.mask.device)
            bias = bias.masked_fill_(~self.mask, float("-inf"))[:, None, None, :]
            self._bias[dtype] = bias
        return bias[..., : self.length]

    def rotations(
        self, positions: torch.Tensor, head_dim: int, theta: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`rope_tables(head_dim, positions, theta)`, looked up in a table of every position the
        cache holds (made once), not computed again each step."""
        if self._rope is None or self._rope[0].shape[0] < self.capacity:
            self._rope = rope_tables(head_dim, torch.arange(self.capacity, device=positions.device), theta)
        return self._rope[0][positions], self._rope[1][positions]

    def layer(self, index: int) -> LayerCache:
        """Layer `index`'s view of the cache (what its attention is given)."""
        return LayerCache(self, index)


@dataclass(frozen=True)
class LayerCache:
    """One layer's part of a `KVCache`: `update` writes the step's keys and values and returns all."""

    cache: KVCache
    index: int

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write (batch, kv_heads, new, head_dim) `k` and `v` at the step's positions; return the
        keys and values of every position fed so far (views of the cache's buffers)."""
        i, c = self.index, self.cache
        end = c.length
        start = end - k.shape[2]
        keys, values = c.keys[i], c.values[i]
        if keys is None or keys.shape[2] < c.capacity:
            shape = (k.shape[0], k.shape[1], c.capacity, k.shape[3])
            grown_k, grown_v = k.new_empty(shape), v.new_empty(shape)
            if keys is not None:
                grown_k[:, :, :start], grown_v[:, :, :start] = keys[:, :, :start], values[:, :, :start]
            keys, values = c.keys[i], c.values[i] = grown_k, grown_v
        keys[:, :, start:end] = k
        values[:, :, start:end] = v
        return keys[:, :, :end], values[:, :, :end]

    def attention_mask(self, dtype: torch.dtype) -> torch.Tensor:
        return self.cache.attention_mask(dtype)

    def projection(self, attention: Attention) -> torch.Tensor:
        """`attention`'s q, k and v weights stacked into one (made once per cache: the weights do not
        change while it decodes), so a step projects with one matmul; each output is the same dot
        product the three would compute."""
        stacked = self.cache._projections.get(self.index)
        if stacked is None:
            parts = (attention.q_proj.weight, attention.k_proj.weight, attention.v_proj.weight)
            stacked = self.cache._projections[self.index] = torch.cat(parts)
        return stacked


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
        if cache is None:
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        else:  # one matmul per step: a decoding step is mostly the cost of each call, not its work
            widths = [self.num_heads * self.head_dim] + [self.kv_heads * self.head_dim] * 2
            q, k, v = F.linear(x, cache.projection(self)).split(widths, dim=-1)
        if self.qk_norm == QKNorm.FULL:
            q, k = self.q_norm(q), self.k_norm(k)
        q = q.view(b, t, self.num_heads, self.head_dim)
        k = k.view(b, t, self.kv_heads, self.head_dim)
        if self.qk_norm == QKNorm.HEAD:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        v = v.view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        if cache is None:
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        else:
            q, k = apply_rope(torch.cat([q, k], dim=1), cos, sin).split(
                [self.num_heads, self.kv_heads], dim=1
            )
        if cache is not None:
            k, v = cache.update(k, v)
            y = self.attend_masked(q, k, v, cache.attention_mask(q.dtype))
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
        """Attention of the new queries over every key `mask` (batch, 1, queries, keys) allows,
        boolean or additive (a KV cache's step: new queries, cached and new keys)."""
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


def causal_lm_loss(logits: torch.Tensor, targets: torch.Tensor, *, per_row: bool = False) -> torch.Tensor:
    """Mean next-token cross-entropy (nats) of (batch, seq, vocab) logits against (batch, seq) targets,
    in float32, over the targets not equal to IGNORE_INDEX. Every architecture's one loss.

    `per_row`: each row's own mean, shape (batch,) (0 for a row with no target), for scoring rows
    one by one (validation windows, conversations)."""
    if not per_row:
        return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=IGNORE_INDEX)
    nll = F.cross_entropy(
        logits.flatten(0, 1).float(), targets.flatten(), ignore_index=IGNORE_INDEX, reduction="none"
    ).view(targets.shape)
    return nll.sum(-1) / (targets != IGNORE_INDEX).sum(-1).clamp(min=1)


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
