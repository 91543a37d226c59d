"""The Llama model: documented sizes, and logits identical to transformers' LlamaForCausalLM after export."""

import pytest
import torch
import transformers

from experiments import llama as sizes
from marin.training.errors import TrainingConfigError
from marin.training.export import export_hf
from marin.training.model import Llama, LlamaConfig


@pytest.mark.parametrize("name", sorted(sizes.DOCUMENTED_PARAMETER_COUNTS))
def test_documented_parameter_counts_match_the_instantiated_modules(name):
    config = getattr(sizes, name).with_vocab_size(sizes.REFERENCE_VOCAB_SIZE)
    with torch.device("meta"):
        model = Llama(config)
    total = sum(p.numel() for p in model.parameters())
    non_embedding = total - sum(
        p.numel() for n, p in model.named_parameters() if n in ("embed_tokens.weight", "lm_head.weight")
    )
    assert (total, non_embedding) == sizes.DOCUMENTED_PARAMETER_COUNTS[name]
    assert config.num_parameters() == total
    assert name in sizes.__doc__ and f"{total:,}" in sizes.__doc__


def test_llama_nano_is_two_layers_hidden_32_two_heads_and_trains_at_2048():
    nano = sizes.llama_nano
    assert (nano.num_layers, nano.hidden_dim, nano.num_heads) == (2, 32, 2)
    assert nano.max_seq_len >= 2048
    assert nano.vocab_size is None  # taken from the tokenizer at run time


@pytest.mark.parametrize(
    "tie, kv_heads, multiplier",
    [(False, 4, 1.0), (True, 2, 1.0), (False, 1, 1.0), (False, 2, 8.0)],
    ids=["untied-mha", "tied-gqa", "untied-mqa", "output-multiplier"],
)
def test_exported_model_gives_the_same_float32_logits_in_transformers(tmp_path, tie, kv_heads, multiplier):
    config = LlamaConfig(
        hidden_dim=64,
        intermediate_dim=96,
        num_layers=3,
        num_heads=4,
        num_kv_heads=kv_heads,
        vocab_size=211,
        max_seq_len=128,
        tie_embeddings=tie,
        rope_theta=500000.0,
        output_multiplier=multiplier,
    )
    torch.manual_seed(0)
    ours = Llama(config)
    with torch.no_grad():  # norms away from 1 so a wrongly mapped norm weight would show
        for _name, p in ours.named_parameters():
            if p.dim() == 1:
                p.uniform_(0.5, 1.5)
    export_hf(ours, config, str(tmp_path))
    theirs = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path), dtype=torch.float32)
    assert isinstance(theirs, transformers.LlamaForCausalLM)
    tokens = torch.randint(0, 211, (3, 97), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        diff = (ours(tokens) - theirs(tokens).logits).abs().max().item()
    assert diff <= 1e-4


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
        Llama(LlamaConfig(hidden_dim=32, intermediate_dim=64, num_layers=1, num_heads=4))
