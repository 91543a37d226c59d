"""The sizes in experiments/models.py: documented parameter counts match the instantiated modules."""

import pytest
import torch

from experiments import models as sizes


@pytest.mark.parametrize("name", sorted(sizes.DOCUMENTED_PARAMETER_COUNTS))
def test_documented_parameter_counts_of_every_architecture_match_the_modules(name):
    config = getattr(sizes, name).with_vocab_size(sizes.REFERENCE_VOCAB_SIZE)
    with torch.device("meta"):
        model = config.build()
    total = sum(p.numel() for p in model.parameters())  # a tied lm_head is one parameter
    embeddings = sum(
        p.numel() for n, p in model.named_parameters() if n in ("embed_tokens.weight", "lm_head.weight")
    )
    assert (total, total - embeddings) == sizes.DOCUMENTED_PARAMETER_COUNTS[name]
    assert (config.num_parameters(), config.num_parameters(include_embeddings=False)) == (
        total,
        total - embeddings,
    )
    assert f"`{name}`" in sizes.__doc__ and f"{total:,}" in sizes.__doc__


def test_each_dense_family_has_a_nano_a_150m_and_a_1b_size():
    assert set(sizes.NANO) >= {"llama", "qwen3", "olmo2"}
    for family in ("llama", "qwen3", "olmo2"):
        counts = [sizes.DOCUMENTED_PARAMETER_COUNTS[n][0] for n in sizes.DENSE_SIZES if n.startswith(family)]
        assert len(counts) == 2 and 100e6 < min(counts) < 200e6 and 0.9e9 < max(counts) < 1.7e9
        assert sizes.NANO[family].architecture == family
