"""Document masking: attention causal within documents only, positions restarting at each, in every architecture."""

import math

import pytest
import torch
import torch.nn.functional as F

from marin.training.document_masking import DocumentMask, document_attention
from marin.training.models import architectures

EOS = 0


def test_a_mask_starts_a_document_after_each_eos_and_restarts_positions():
    tokens = torch.tensor([[5, 6, EOS, 7, EOS, 8, 9, 9], [5, 5, 5, 5, 5, 5, 5, EOS]])
    mask = DocumentMask.of(tokens, EOS, block=4)
    assert mask.positions.tolist() == [[0, 1, 2, 0, 1, 0, 1, 2], list(range(8))]
    (q0, q1, k0, first), (q0b, q1b, k0b, second) = mask.blocks
    assert (q0, q1, k0, q0b, q1b, k0b) == (0, 4, 0, 4, 8, 0)  # row 1 is one document: keys from 0
    assert first[0, 0].tolist()[3] == [-math.inf, -math.inf, -math.inf, 0.0]  # token 3 starts document 1
    single = DocumentMask.of(tokens[1:], EOS)
    assert single.blocks is None and single.block_mask is None  # one document: plain causal attention


def test_blocked_attention_equals_dense_masked_attention_with_its_gradients():
    torch.manual_seed(0)
    batch, heads, seq, dim = 2, 3, 300, 8
    tokens = torch.randint(1, 50, (batch, seq))
    tokens[0, [20, 21, 150, 299]] = EOS
    tokens[1, [130]] = EOS  # a document that spans blocks
    doc_ids = torch.cumsum((tokens == EOS).long(), 1) - (tokens == EOS).long()
    q, k, v = (torch.randn(batch, heads, seq, dim, dtype=torch.float64, requires_grad=True) for _ in range(3))
    dense = (doc_ids[:, None, :, None] == doc_ids[:, None, None, :]) & torch.ones(
        seq, seq, dtype=torch.bool
    ).tril()
    ours = document_attention(q, k, v, DocumentMask.of(tokens, EOS, block=64))
    reference = F.scaled_dot_product_attention(q, k, v, attn_mask=dense)
    assert torch.allclose(ours, reference, atol=1e-12)
    grads = torch.autograd.grad(ours.square().sum(), (q, k, v))
    expected = torch.autograd.grad(reference.square().sum(), (q, k, v))
    assert all(torch.allclose(a, b, atol=1e-12) for a, b in zip(grads, expected, strict=True))
    plain = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert not torch.allclose(ours, plain)  # the mask is real: across documents, attention differs


def _tiny(cls):
    """A two-layer config of architecture class `cls` (the fields every decoder shares)."""
    return cls(hidden_dim=32, intermediate_dim=64, num_layers=2, num_heads=4, num_kv_heads=2, vocab_size=64)


@pytest.mark.parametrize("name", sorted(architectures()))
def test_with_masking_a_second_document_gets_the_logits_it_gets_alone(name):
    torch.manual_seed(0)
    model = _tiny(architectures()[name]).build().double().eval()
    first, second = torch.randint(1, 64, (1, 23)), torch.randint(1, 64, (1, 40))
    first[0, -1] = EOS  # the first document ends with EOS, as every cached document does
    window = torch.cat([first, second], dim=1)
    with torch.no_grad():
        alone = model(second)
        masked = model(window, document_eos=EOS)[:, first.shape[1] :]
        plain = model(window)[:, first.shape[1] :]
    assert torch.allclose(masked, alone, atol=1e-5, rtol=0)
    assert not torch.allclose(plain, alone, atol=1e-3, rtol=0)
    with torch.no_grad():  # the first document is untouched by masking, and its loss is the same
        assert torch.allclose(
            model(window, document_eos=EOS)[:, : first.shape[1]], model(first), atol=1e-5, rtol=0
        )
