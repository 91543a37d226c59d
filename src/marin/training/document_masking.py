"""Document masking: attention that never crosses an EOS boundary inside a packed window.

A training window packs documents end to end, each ending with EOS. With document masking a token
attends only to earlier tokens of its own document (the mask is causal and block-diagonal), and
rotary positions restart at 0 at each document, so every document is computed exactly as if it
were alone at the start of a window. A document's id is the number of EOS tokens before it in the
row: the EOS itself belongs to the document it ends.

Two kernels compute the same attention:
- **CPU** (and any device without a compiled kernel): scaled-dot-product attention over blocks of
  queries, each against only the keys from the earliest document start among its queries up to its
  last query, under the exact boolean mask. Keys of earlier documents are never touched, so short
  documents make it cheaper than plain causal attention, and one long document costs about as much
  (`benchmarks/train_document_masking.py`).
- **CUDA**: `torch.nn.attention.flex_attention` with a block mask built from the document ids,
  compiled once per process (`torch.compile`), which skips fully masked tiles in the kernel.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F

QUERY_BLOCK = 128  # CPU: queries per block; measured fastest at seq 2048 (see the module docstring)


@dataclass(frozen=True)
class DocumentLayout:
    """Each token's document in a batch of rows: `doc_ids`, the first index of its document
    (`starts`) and its position within it (`positions`); all (batch, seq) int64."""

    doc_ids: torch.Tensor
    starts: torch.Tensor
    positions: torch.Tensor

    @classmethod
    def of(cls, tokens: torch.Tensor, eos_id: int) -> DocumentLayout:
        """The layout of `tokens` (batch, seq): a new document starts after every EOS."""
        ends = tokens == eos_id
        doc_ids = torch.cumsum(ends.long(), dim=1) - ends.long()  # EOS belongs to the document it ends
        index = torch.arange(tokens.shape[1], device=tokens.device).expand_as(tokens)
        first = torch.ones_like(ends)
        first[:, 1:] = doc_ids[:, 1:] != doc_ids[:, :-1]
        starts = torch.cummax(torch.where(first, index, torch.zeros_like(index)), dim=1).values
        return cls(doc_ids, starts, index - starts)

    @property
    def single_document(self) -> bool:
        """Whether every row is one document (plain causal attention then computes the same)."""
        return bool((self.doc_ids[:, -1] == self.doc_ids[:, 0]).all())


def rope_at_positions(table: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Rows of a (seq, dim) cos or sin table at per-token `positions` (batch, seq): (batch, 1, seq, dim)."""
    return table[positions].unsqueeze(1)


def document_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: DocumentLayout, *, block: int = QUERY_BLOCK
) -> torch.Tensor:
    """Causal attention within documents for q, k, v of shape (batch, heads, seq, head_dim)."""
    if layout.single_document:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    if q.is_cuda:
        return _flex_attention(q, k, v, layout.doc_ids)
    return _blocked_attention(q, k, v, layout, block)


def _blocked_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: DocumentLayout, block: int
) -> torch.Tensor:
    seq = q.shape[2]
    index = torch.arange(seq, device=q.device)
    doc = layout.doc_ids
    first_keys = layout.starts[:, ::block].min(dim=0).values.tolist()  # per block, over the batch
    outs = []
    for b, q0 in enumerate(range(0, seq, block)):
        q1, k0 = min(seq, q0 + block), first_keys[b]
        same = doc[:, None, q0:q1, None] == doc[:, None, None, k0:q1]
        causal = index[q0:q1, None] >= index[None, k0:q1]
        outs.append(
            F.scaled_dot_product_attention(
                q[:, :, q0:q1], k[:, :, k0:q1], v[:, :, k0:q1], attn_mask=same & causal
            )
        )
    return torch.cat(outs, dim=2)


def _flex_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, doc_ids: torch.Tensor) -> torch.Tensor:
    from torch.nn.attention.flex_attention import create_block_mask

    def same_document_causal(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (doc_ids[b, q_idx] == doc_ids[b, kv_idx])

    seq = q.shape[2]
    mask = create_block_mask(same_document_causal, doc_ids.shape[0], None, seq, seq, device=q.device)
    return _compiled_flex()(q, k, v, block_mask=mask)


@functools.cache
def _compiled_flex():
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention, dynamic=False)
