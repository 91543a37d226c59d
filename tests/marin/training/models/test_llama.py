"""The Llama sizes: documented parameter counts, and bad shapes refused with the field named."""

import pytest
import torch

from experiments import llama as sizes
from marin.training.errors import TrainingConfigError
from marin.training.models import LlamaConfig


@pytest.mark.parametrize("name", sorted(sizes.DOCUMENTED_PARAMETER_COUNTS))
def test_documented_parameter_counts_match_the_instantiated_modules(name):
    config = getattr(sizes, name).with_vocab_size(sizes.REFERENCE_VOCAB_SIZE)
    with torch.device("meta"):
        model = config.build()
    total = sum(p.numel() for p in model.parameters())
    non_embedding = total - sum(
        p.numel() for n, p in model.named_parameters() if n in ("embed_tokens.weight", "lm_head.weight")
    )
    assert (total, non_embedding) == sizes.DOCUMENTED_PARAMETER_COUNTS[name]
    assert config.num_parameters() == total
    assert config.num_parameters(include_embeddings=False) == non_embedding
    assert name in sizes.__doc__ and f"{total:,}" in sizes.__doc__


def test_llama_nano_is_two_layers_hidden_32_two_heads_and_trains_at_2048():
    nano = sizes.llama_nano
    assert (nano.num_layers, nano.hidden_dim, nano.num_heads) == (2, 32, 2)
    assert nano.max_seq_len >= 2048
    assert nano.vocab_size is None  # taken from the tokenizer at run time


def test_bad_shapes_are_refused_with_the_field_named():
    with pytest.raises(TrainingConfigError, match="num_heads"):
        LlamaConfig(hidden_dim=30, intermediate_dim=64, num_layers=1, num_heads=4)
    with pytest.raises(TrainingConfigError, match="num_kv_heads"):
        LlamaConfig(hidden_dim=32, intermediate_dim=64, num_layers=1, num_heads=4, num_kv_heads=3)
    with pytest.raises(TrainingConfigError, match="untied"):
        LlamaConfig(
            hidden_dim=32,
            intermediate_dim=64,
            num_layers=1,
            num_heads=4,
            tie_embeddings=True,
            output_multiplier=2.0,
        )
    with pytest.raises(TrainingConfigError, match="vocab_size"):
        LlamaConfig(hidden_dim=32, intermediate_dim=64, num_layers=1, num_heads=4).build()
