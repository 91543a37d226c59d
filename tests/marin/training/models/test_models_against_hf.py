"""Every architecture against Hugging Face's own class, both ways, to 1e-5 in float32.

Ours -> HF: a randomly initialised model of ours, exported, loaded by `AutoModelForCausalLM`, gives
the same logits on random tokens. HF -> ours: a randomly initialised HF model saved by the test,
loaded with `load_model` and by `load_init_weights` (what `train_lm(init_from=HF folder)` runs),
gives HF's logits. Norm weights are drawn away from 1 so a wrongly mapped norm would show.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
import transformers

from marin.training import load_model
from marin.training.export import export_hf
from marin.training.init_weights import load_init_weights
from marin.training.models import LlamaConfig, MoEConfig, Olmo2Config, Qwen3Config, config_from_hf

VOCAB = 211
SHAPE = dict(hidden_dim=64, intermediate_dim=96, num_layers=3, num_heads=4, vocab_size=VOCAB, max_seq_len=128)

CASES = {
    "llama-gqa-output-multiplier": LlamaConfig(
        **SHAPE, num_kv_heads=2, rope_theta=500000.0, output_multiplier=8.0
    ),
    "llama-tied-mqa": LlamaConfig(**SHAPE, num_kv_heads=1, tie_embeddings=True),
    "qwen3-gqa-head-dim-32": Qwen3Config(**SHAPE, num_kv_heads=2, head_dim=32),
    "qwen3-tied": Qwen3Config(**SHAPE, num_kv_heads=2, tie_embeddings=True),
    "olmo2-gqa": Olmo2Config(**SHAPE, num_kv_heads=2, output_multiplier=4.0),
    "olmo2-mha": Olmo2Config(**SHAPE),
    "llama-output-multiplier": LlamaConfig(**SHAPE, num_kv_heads=4, output_multiplier=8.0),
    "moe-olmoe": MoEConfig(**SHAPE | {"intermediate_dim": 32}, num_kv_heads=2),
    "moe-qwen3-renormalized-head-dim-24": MoEConfig(
        **SHAPE | {"intermediate_dim": 32},
        num_kv_heads=2,
        head_dim=24,
        normalize_top_k=True,
        hf_format="qwen3_moe",
    ),
    "moe-qwen2-shared-expert": MoEConfig(
        **SHAPE | {"intermediate_dim": 32}, num_kv_heads=2, shared_expert_dim=48, hf_format="qwen2_moe"
    ),
}


def _tokens() -> torch.Tensor:
    return torch.randint(0, VOCAB, (3, 97), generator=torch.Generator().manual_seed(1))


def _perturb_norms(model: torch.nn.Module) -> None:
    with torch.no_grad():
        for _name, p in model.named_parameters():
            if p.dim() == 1:
                p.uniform_(0.5, 1.5)


@pytest.mark.parametrize("name", sorted(CASES))
def test_our_export_gives_hugging_faces_class_the_same_logits(tmp_path, name):
    config = CASES[name]
    torch.manual_seed(0)
    ours = config.build()
    _perturb_norms(ours)
    export_hf(ours, config, str(tmp_path))
    theirs = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path), dtype=torch.float32)
    assert type(theirs).__name__ == config.hf.classes(config)[0]
    tokens = _tokens()
    with torch.no_grad():
        diff = (ours(tokens) - theirs(tokens).logits).abs().max().item()
    assert diff <= 1e-5
    loaded, loaded_config = load_model(str(tmp_path))  # and our export reads back as our config
    assert _canonical(loaded_config) == _canonical(config)
    with torch.no_grad():
        assert (loaded(tokens) - ours(tokens)).abs().max().item() <= 1e-5


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_hugging_face_model_saved_by_hf_loads_into_ours_with_its_logits(tmp_path, name):
    config = _canonical(CASES[name])
    hf_class, config_class = config.hf.classes(config)
    hf_config = getattr(transformers, config_class)(**config.hf.config_kwargs(config))
    if hasattr(hf_config, "rope_parameters"):
        hf_config.rope_parameters = {"rope_type": "default", "rope_theta": config.rope_theta}
    else:
        hf_config.rope_theta = config.rope_theta
    torch.manual_seed(0)
    theirs = getattr(transformers, hf_class)(hf_config).eval()
    _perturb_norms(theirs)
    theirs.save_pretrained(str(tmp_path))
    assert _canonical(config_from_hf(theirs.config.to_dict())) == config
    tokens = _tokens()
    with torch.no_grad():
        expected = theirs(tokens).logits
    loaded, _ = load_model(str(tmp_path))
    ours = config.build()
    load_init_weights(str(tmp_path), ours, config)  # train_lm(init_from=<this folder>)
    with torch.no_grad():
        assert (loaded(tokens) - expected).abs().max().item() <= 1e-5
        assert (ours(tokens) - expected).abs().max().item() <= 1e-5


def _canonical(config):
    """A config as an export reads back: the output multiplier folded into the weights, the KV heads spelt out."""
    return dataclasses.replace(config, output_multiplier=1.0, num_kv_heads=config.kv_heads)
