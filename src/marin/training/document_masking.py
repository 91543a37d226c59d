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
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

QUERY_BLOCK = 128  # CPU: queries per block (the fastest of 128 / 256 / 512 at seq 2048)


@dataclass(frozen=True)
class DocumentMask:
    """Where each row's documents are, and the attention plan every layer shares.

    `positions` (batch, seq) restart at 0 at each document. `blocks` (CPU) holds, per block of
    queries [q0, q1), the first key k0 it needs and its boolean mask (batch, 1, q1 - q0, q1 - k0);
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
            blocks.append((q0, q1, k0, same & (index[q0:q1, None] >= index[None, k0:q1])))
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
    outs = [
        F.scaled_dot_product_attention(q[:, :, q0:q1], k[:, :, k0:q1], v[:, :, k0:q1], attn_mask=allowed)
        for q0, q1, k0, allowed in mask.blocks
    ]
    return torch.cat(outs, dim=2)


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
