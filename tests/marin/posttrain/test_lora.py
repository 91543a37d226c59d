"""LoRA: PEFT loads our adapters onto the Hugging Face export and computes our logits; merging gives them too."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModelForCausalLM

from marin.posttrain.lora import (
    LoraConfig,
    LoraConfigError,
    adapter_state_dict,
    adapters_disabled,
    apply_lora,
    base_copy,
    merged_copy,
    save_peft_adapter,
)
from marin.training.export import export_hf
from marin.training.models import LlamaConfig

peft = pytest.importorskip("peft")

CONFIG = LlamaConfig(
    hidden_dim=32,
    intermediate_dim=64,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    max_seq_len=64,
    vocab_size=97,
    output_multiplier=4.0,  # folded into lm_head by the export: the adapters must not care
)
LORA = LoraConfig(rank=4, alpha=8.0, targets=("q_proj", "v_proj", "down_proj"))


def _adapted_model() -> torch.nn.Module:
    torch.manual_seed(0)
    model = CONFIG.build()
    apply_lora(model, LORA)
    with torch.no_grad():  # as if trained: B starts at zero, which would make every check trivial
        for name, p in model.named_parameters():
            if ".lora_B." in name:
                p.normal_(0.0, 0.2)
    return model.eval()


def _tokens() -> torch.Tensor:
    return torch.randint(0, CONFIG.vocab_size, (2, 24), generator=torch.Generator().manual_seed(1))


def test_peft_loads_the_adapter_onto_the_export_and_gives_our_logits(tmp_path):
    model = _adapted_model()
    export_hf(base_copy(model), CONFIG, str(tmp_path / "base"))
    save_peft_adapter(model, CONFIG, LORA, str(tmp_path / "adapter"), base_model=str(tmp_path / "base"))
    hf = AutoModelForCausalLM.from_pretrained(tmp_path / "base", dtype=torch.float32)
    with_adapter = peft.PeftModel.from_pretrained(hf, tmp_path / "adapter").eval()
    tokens = _tokens()
    with torch.no_grad():
        ours, theirs = model(tokens), with_adapter(tokens).logits
        assert torch.allclose(ours, theirs, atol=1e-5)
        assert not torch.allclose(ours, base_copy(model)(tokens), atol=1e-3)  # the adapters change the logits
    adapter_config = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    assert adapter_config["r"] == 4 and adapter_config["lora_alpha"] == 8.0
    assert len(adapter_config["target_modules"]) == 3 * CONFIG.num_layers


def test_the_merged_export_gives_the_same_logits_without_peft(tmp_path):
    model = _adapted_model()
    export_hf(merged_copy(model), CONFIG, str(tmp_path / "merged"))
    hf = AutoModelForCausalLM.from_pretrained(tmp_path / "merged", dtype=torch.float32).eval()
    tokens = _tokens()
    with torch.no_grad():
        assert torch.allclose(model(tokens), hf(tokens).logits, atol=1e-5)


def test_only_the_adapters_train_and_they_start_at_the_model_itself():
    torch.manual_seed(0)
    model = CONFIG.build()
    tokens = _tokens()
    with torch.no_grad():
        before = model(tokens)
    wrapped = apply_lora(model, LORA)
    assert wrapped == [
        f"layers.{i}.{m}" for i in range(2) for m in ("self_attn.q_proj", "self_attn.v_proj", "mlp.down_proj")
    ]
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == set(adapter_state_dict(model))
    assert len(trainable) == 2 * len(wrapped)
    with torch.no_grad():
        assert torch.equal(model(tokens), before)
        for name, p in model.named_parameters():
            if ".lora_B." in name:
                p.fill_(0.1)
        assert not torch.allclose(model(tokens), before)
        with adapters_disabled(model):
            assert torch.equal(model(tokens), before)


def test_a_target_that_matches_no_layer_is_one_line_listing_the_layers():
    model = CONFIG.build()
    with pytest.raises(LoraConfigError) as caught:
        apply_lora(model, LoraConfig(targets=("q_proj", "qkv")))
    message = str(caught.value)
    assert "\n" not in message
    assert "'qkv' matches no linear layer" in message
    assert "down_proj, gate_proj, k_proj, o_proj, q_proj, up_proj, v_proj" in message
    assert all(isinstance(m, torch.nn.Linear) for n, m in model.named_modules() if n.endswith("q_proj"))


def test_all_linear_adapts_every_block_layer_but_not_the_output():
    model = CONFIG.build()
    wrapped = apply_lora(model, LoraConfig(targets="all-linear"))
    assert len(wrapped) == 7 * CONFIG.num_layers
    assert not any(n.startswith("lm_head") for n in wrapped)
