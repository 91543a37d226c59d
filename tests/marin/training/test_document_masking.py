"""Document masking's attention: causal within documents only, positions restarting at each document."""

import torch
import torch.nn.functional as F

from marin.training.document_masking import DocumentLayout, document_attention

EOS = 0


def test_a_layout_starts_a_document_after_each_eos_and_restarts_positions():
    tokens = torch.tensor([[5, 6, EOS, 7, EOS, 8, 9, 9], [5, 5, 5, 5, 5, 5, 5, EOS]])
    layout = DocumentLayout.of(tokens, EOS)
    assert layout.doc_ids.tolist() == [[0, 0, 0, 1, 1, 2, 2, 2], [0] * 8]
    assert layout.positions.tolist() == [[0, 1, 2, 0, 1, 0, 1, 2], list(range(8))]
    assert layout.starts.tolist() == [[0, 0, 0, 3, 3, 5, 5, 5], [0] * 8]
    assert not layout.single_document and DocumentLayout.of(tokens[1:], EOS).single_document


def test_blocked_attention_equals_dense_masked_attention_with_its_gradients():
    torch.manual_seed(0)
    batch, heads, seq, dim = 2, 3, 300, 8
    tokens = torch.randint(1, 50, (batch, seq))
    tokens[0, [20, 21, 150, 299]] = EOS
    tokens[1, [130]] = EOS  # a document that spans blocks
    layout = DocumentLayout.of(tokens, EOS)
    q, k, v = (torch.randn(batch, heads, seq, dim, dtype=torch.float64, requires_grad=True) for _ in range(3))
    mask = (layout.doc_ids[:, None, :, None] == layout.doc_ids[:, None, None, :]) & torch.ones(
        seq, seq, dtype=torch.bool
    ).tril()
    ours = document_attention(q, k, v, layout, block=64)
    reference = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.allclose(ours, reference, atol=1e-12)
    grads = torch.autograd.grad(ours.square().sum(), (q, k, v))
    expected = torch.autograd.grad(reference.square().sum(), (q, k, v))
    assert all(torch.allclose(a, b, atol=1e-12) for a, b in zip(grads, expected, strict=True))
    plain = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert not torch.allclose(ours, plain)  # the mask is real: across documents, attention differs
