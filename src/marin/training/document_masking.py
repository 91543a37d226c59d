"""Document masking: attention that never crosses an EOS boundary inside a packed window.

A training window packs documents end to end, each ending with EOS. With document masking a token
attends only to earlier tokens of its own document (the mask is causal and block-diagonal), and
rotary positions restart at 0 at each document, so every document is computed exactly as if it
were alone at the start of a window. A document's id is the number of EOS tokens before it in the
row: the EOS itself belongs to the document it ends.

`DocumentMask.of(tokens, eos_id)` is built once per forward and shared by every layer; two kernels
compute the same attention from it:
- **CPU** (and any device but CUDA): scaled-dot-product attention over blocks of `QUERY_BLOCK`
  queries, each against only the keys from the earliest document start among its queries up to
  its last query, under the exact boolean mask. Keys of earlier documents are never touched, so
  short documents make it cheaper than plain causal attention, and one long document costs about
  what causal attention does (`benchmarks/train_document_masking.py`).
- **CUDA**: `torch.nn.attention.flex_attention` with a block mask built from the document ids,
  compiled once per process (`torch.compile`), whose kernel skips the tiles the mask empties.
A batch whose rows are each one document takes plain causal attention, which computes the same.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

QUERY_BLOCK = 128  # CPU: queries per block (the fastest of 128 / 256 / 512 at seq 2048)


@dataclass(frozen=True)
class DocumentMask:
    """Where each row's documents are, and the attention plan every layer shares.

    `positions` (batch, seq) restart at 0 at each document. `blocks` (CPU) holds, per block of
    queries [q0, q1), the first key k0 it needs and its additive mask (batch, 1, q1 - q0, q1 - k0):
    0 where a query may attend, -inf where not;
    `block_mask` (CUDA) is flex attention's. Both are None when every row is one document.
    """

    positions: torch.Tensor
    blocks: tuple[tuple[int, int, int, torch.Tensor], ...] | None = None
    block_mask: Any = None

    @classmethod
    def of(cls, tokens: torch.Tensor, eos_id: int, *, block: int = QUERY_BLOCK) -> DocumentMask:
        """The mask of `tokens` (batch, seq): a new document starts after every EOS."""
        ends = (tokens == eos_id).long()
        return cls.from_ids(torch.cumsum(ends, dim=1) - ends, block=block)  # an EOS ends its document

    @classmethod
    def from_ids(cls, doc_ids: torch.Tensor, *, block: int = QUERY_BLOCK) -> DocumentMask:
        """The mask of per-token document ids (batch, seq), non-decreasing along each row: a new
        document starts wherever the id changes (packed conversations, say, marked without EOS)."""
        seq = doc_ids.shape[1]
        index = torch.arange(seq, device=doc_ids.device)
        first = torch.ones_like(doc_ids, dtype=torch.bool)
        first[:, 1:] = doc_ids[:, 1:] != doc_ids[:, :-1]
        starts = torch.cummax(torch.where(first, index, 0), dim=1).values
        positions = index - starts
        if bool(
            (doc_ids[:, -1] == doc_ids[:, 0]).all()
        ):  # one document per row: causal attention is the same
            return cls(positions)
        if doc_ids.is_cuda:
            return cls(positions, block_mask=_flex_block_mask(doc_ids))
        first_keys = starts[:, ::block].min(dim=0).values.tolist()  # a block's earliest document start
        blocks = []
        for q0, k0 in zip(range(0, seq, block), first_keys, strict=True):
            q1 = min(seq, q0 + block)
            same = doc_ids[:, None, q0:q1, None] == doc_ids[:, None, None, k0:q1]
            allowed = same & (index[q0:q1, None] >= index[None, k0:q1])
            blocks.append((q0, q1, k0, torch.zeros(allowed.shape).masked_fill_(~allowed, -math.inf)))
        return cls(positions, blocks=tuple(blocks))


def document_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: DocumentMask | None
) -> torch.Tensor:
    """Causal attention within documents (all of each row when `mask` is None) of q, k, v of shape
    (batch, heads, seq, head_dim), k and v with as many heads as q."""
    if mask is None or (mask.blocks is None and mask.block_mask is None):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    if mask.block_mask is not None:
        return _compiled_flex()(q, k, v, block_mask=mask.block_mask)
    return _BlockedAttention.apply(q, k, v, mask.blocks)


class _BlockedAttention(torch.autograd.Function):
    """Attention block by block (`DocumentMask.blocks`), with a backward that writes each block's
    gradients into one buffer per input. Through plain autograd, every slice of q, k and v would
    take a full-size zero tensor in the backward (more time than the attention itself at seq 2048).
    On CPU the blocks run torch's own flash kernel and its backward (the ops scaled-dot-product
    attention dispatches to), keeping each block's log-sum-exp; elsewhere the backward recomputes
    each block's attention."""

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, blocks: tuple) -> torch.Tensor:
        ctx.flash = _CPU_FLASH is not None and q.device.type == "cpu"
        ctx.blocks = blocks = tuple((q0, q1, k0, allowed.to(q.dtype)) for q0, q1, k0, allowed in blocks)
        outs, saved = [], []
        for q0, q1, k0, allowed in blocks:
            qb, kb, vb = q[:, :, q0:q1], k[:, :, k0:q1], v[:, :, k0:q1]
            if ctx.flash:
                out, lse = _CPU_FLASH[0](qb, kb, vb, attn_mask=allowed)
                saved += [out, lse]
            else:
                out = F.scaled_dot_product_attention(qb, kb, vb, attn_mask=allowed)
            outs.append(out)
        ctx.save_for_backward(q, k, v, *saved)
        return torch.cat(outs, dim=2)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, None]:
        q, k, v, *saved = ctx.saved_tensors
        dk, dv = torch.zeros_like(k), torch.zeros_like(v)
        dqs = []
        for i, (q0, q1, k0, allowed) in enumerate(ctx.blocks):
            qb, kb, vb, gb = q[:, :, q0:q1], k[:, :, k0:q1], v[:, :, k0:q1], grad[:, :, q0:q1].contiguous()
            if ctx.flash:
                out, lse = saved[2 * i], saved[2 * i + 1]
                gq, gk, gv = _CPU_FLASH[1](gb, qb, kb, vb, out, lse, 0.0, False, attn_mask=allowed)
            else:
                qb, kb, vb = (t.detach().requires_grad_() for t in (qb, kb, vb))
                with torch.enable_grad():
                    out = F.scaled_dot_product_attention(qb, kb, vb, attn_mask=allowed)
                gq, gk, gv = torch.autograd.grad(out, (qb, kb, vb), gb)
            dqs.append(gq)
            dk[:, :, k0:q1] += gk
            dv[:, :, k0:q1] += gv
        return torch.cat(dqs, dim=2), dk, dv, None


def _cpu_flash_ops() -> tuple[Any, Any] | None:
    """torch's CPU flash-attention forward and backward, which return and take the log-sum-exp."""
    ops = torch.ops.aten
    if hasattr(ops, "_scaled_dot_product_flash_attention_for_cpu") and hasattr(
        ops, "_scaled_dot_product_flash_attention_for_cpu_backward"
    ):
        return (
            ops._scaled_dot_product_flash_attention_for_cpu,
            ops._scaled_dot_product_flash_attention_for_cpu_backward,
        )
    return None


_CPU_FLASH = _cpu_flash_ops()


def _flex_block_mask(doc_ids: torch.Tensor) -> Any:
    from torch.nn.attention.flex_attention import create_block_mask

    def same_document_causal(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (doc_ids[b, q_idx] == doc_ids[b, kv_idx])

    batch, seq = doc_ids.shape
    return create_block_mask(same_document_causal, batch, None, seq, seq, device=doc_ids.device)


@functools.cache
def _compiled_flex():
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention, dynamic=False)
