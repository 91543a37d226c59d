"""The MoE feed-forward block against Hugging Face's: with the same weights it gives OLMoE's,
Qwen3-MoE's and (with its shared expert) Qwen2-MoE's outputs and gradients, HF's load-balancing loss
and Switch Transformer's z-loss, and its per-expert weights round-trip through the layout HF
checkpoints store."""

from __future__ import annotations

import pytest
import torch
import transformers
from safetensors.torch import load_file
from transformers.models.olmoe.modeling_olmoe import OlmoeSparseMoeBlock, load_balancing_loss_func
from transformers.models.qwen2_moe.modeling_qwen2_moe import Qwen2MoeSparseMoeBlock
from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock
from transformers.models.switch_transformers.modeling_switch_transformers import router_z_loss_func

from marin.training.errors import TrainingConfigError
from marin.training.models.moe import MoEFeedForward, MoEFeedForwardConfig, experts_from_hf, experts_to_hf

HIDDEN, EXPERT_DIM, EXPERTS, TOP_K, SHARED = 32, 48, 8, 2, 16


def _hf_block(kind: str) -> torch.nn.Module:
    """A randomly initialised HF block; OLMoE keeps the raw top-k probabilities, Qwen3-MoE renormalises,
    Qwen2-MoE adds a gated shared expert of width SHARED."""
    common = dict(
        hidden_size=HIDDEN, num_experts=EXPERTS, num_experts_per_tok=TOP_K, experts_implementation="eager"
    )
    if kind == "olmoe":
        block = OlmoeSparseMoeBlock(transformers.OlmoeConfig(intermediate_size=EXPERT_DIM, **common))
    elif kind == "qwen3_moe":
        config = transformers.Qwen3MoeConfig(moe_intermediate_size=EXPERT_DIM, norm_topk_prob=True, **common)
        block = Qwen3MoeSparseMoeBlock(config)
    else:
        config = transformers.Qwen2MoeConfig(
            moe_intermediate_size=EXPERT_DIM, shared_expert_intermediate_size=SHARED, **common
        )
        block = Qwen2MoeSparseMoeBlock(config)
    torch.manual_seed(0)
    with torch.no_grad():
        for p in block.parameters():
            p.normal_(0.0, 0.3)
    return block


def _config(**kwargs) -> MoEFeedForwardConfig:
    """The block's config with unit loss weights, so its aux losses are the raw ones."""
    return MoEFeedForwardConfig(
        HIDDEN, EXPERT_DIM, EXPERTS, TOP_K, load_balancing_weight=1.0, router_z_weight=1.0, **kwargs
    )


def _ours_like(hf: torch.nn.Module) -> MoEFeedForward:
    shared = hf.shared_expert.gate_proj.out_features if hasattr(hf, "shared_expert") else 0
    ours = _config(normalize_top_k=hf.gate.norm_topk_prob, shared_expert_dim=shared).build()
    ours.load_state_dict(hf.state_dict())
    return ours


@pytest.mark.parametrize("kind", ["olmoe", "qwen3_moe", "qwen2_moe"])
def test_block_gives_hf_outputs_and_gradients_in_float32(kind):
    hf = _hf_block(kind)
    ours = _ours_like(hf)
    x = torch.randn(3, 17, HIDDEN, generator=torch.Generator().manual_seed(1))
    x_hf, x_ours = x.clone().requires_grad_(), x.clone().requires_grad_()
    expected = hf(x_hf)
    got, _ = ours(x_ours)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)
    grad = torch.randn_like(expected)
    expected.backward(grad)
    got.backward(grad)
    torch.testing.assert_close(x_ours.grad, x_hf.grad, rtol=1e-5, atol=1e-5)
    hf_params = dict(hf.named_parameters())
    for name, p in ours.named_parameters():
        torch.testing.assert_close(p.grad, hf_params[name].grad, rtol=1e-5, atol=1e-5, msg=name)


def test_aux_losses_equal_hf_load_balancing_loss_and_switch_z_loss():
    hf = _hf_block("olmoe")
    ours = _ours_like(hf)
    x = torch.randn(2, 40, HIDDEN, generator=torch.Generator().manual_seed(2))
    _, aux = ours(x)
    logits = torch.nn.functional.linear(x.reshape(-1, HIDDEN), hf.gate.weight)
    expected_balance = load_balancing_loss_func((logits,), EXPERTS, TOP_K)
    torch.testing.assert_close(aux["load_balancing_loss"], expected_balance, rtol=1e-6, atol=0)
    torch.testing.assert_close(
        aux["router_z_loss"], router_z_loss_func(logits.view(2, 40, EXPERTS)), rtol=1e-6, atol=0
    )
    weighted = MoEFeedForwardConfig(
        HIDDEN, EXPERT_DIM, EXPERTS, TOP_K, load_balancing_weight=0.01, router_z_weight=0.001
    )
    weighted_block = weighted.build()
    weighted_block.load_state_dict(ours.state_dict())
    _, weighted_aux = weighted_block(x)
    torch.testing.assert_close(weighted_aux["load_balancing_loss"], 0.01 * expected_balance)
    torch.testing.assert_close(weighted_aux["router_z_loss"], 0.001 * aux["router_z_loss"])


def test_the_block_counts_the_tokens_each_expert_got_while_training_only():
    hf = _hf_block("olmoe")
    ours = _ours_like(hf)
    batches = [torch.randn(2, 40, HIDDEN, generator=torch.Generator().manual_seed(s)) for s in (6, 7)]
    for x in batches:
        ours(x)
    ours.eval()
    ours(torch.randn(5, HIDDEN))  # an evaluation pass is not counted
    chosen = torch.cat(
        [
            torch.nn.functional.linear(x.reshape(-1, HIDDEN), hf.gate.weight).topk(TOP_K).indices.flatten()
            for x in batches
        ]
    )
    assert ours.take_routed_counts().tolist() == torch.bincount(chosen, minlength=EXPERTS).tolist()
    assert ours.take_routed_counts() is None  # taking them restarts the count


def test_balance_loss_trains_only_the_router_and_is_top_k_when_probabilities_are_uniform():
    ours = _ours_like(_hf_block("olmoe"))
    x = torch.randn(64, HIDDEN, generator=torch.Generator().manual_seed(3))
    _, aux = ours(x)
    aux["load_balancing_loss"].backward()
    assert ours.gate.weight.grad.abs().sum() > 0 and ours.experts.down_proj.grad is None
    with torch.no_grad():
        ours.gate.weight.zero_()  # every P_e = 1/E, so E · Σ f_e · P_e = Σ f_e = k whatever top-k picks
    _, aux = ours(x)
    assert aux["load_balancing_loss"].item() == pytest.approx(TOP_K)
    assert aux["router_z_loss"].item() == pytest.approx(torch.log(torch.tensor(float(EXPERTS))).item() ** 2)


def test_experts_no_token_chooses_contribute_nothing_and_match_hf():
    hf = _hf_block("qwen3_moe")
    with torch.no_grad():  # for positive inputs, experts 5, 6 and 7 score below every other
        hf.gate.weight.abs_()
        hf.gate.weight[5:] *= -1
    ours = _ours_like(hf)
    x = torch.randn(20, HIDDEN, generator=torch.Generator().manual_seed(4)).abs()
    got, _ = ours(x)
    assert ours.take_routed_counts()[5:].sum().item() == 0
    torch.testing.assert_close(got, hf(x.unsqueeze(0)).squeeze(0), rtol=0, atol=1e-5)


def test_bfloat16_block_runs_forward_and_backward():
    ours = _ours_like(_hf_block("olmoe")).to(torch.bfloat16)
    x = torch.randn(4, 8, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
    out, aux = ours(x)
    (out.float().square().mean() + aux["load_balancing_loss"]).backward()
    assert out.dtype == torch.bfloat16 and x.grad is not None and ours.experts.gate_up_proj.grad is not None


def test_expert_weights_round_trip_through_the_per_expert_layout_hf_saves(tmp_path):
    config = transformers.OlmoeConfig(
        vocab_size=64,
        hidden_size=HIDDEN,
        intermediate_size=EXPERT_DIM,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_experts=EXPERTS,
        num_experts_per_tok=TOP_K,
        eos_token_id=0,
        pad_token_id=0,
    )
    model = transformers.OlmoeForCausalLM(config)
    model.save_pretrained(str(tmp_path))
    on_disk = load_file(str(tmp_path / "model.safetensors"))
    prefix = "model.layers.0.mlp.experts"
    stacked = experts_from_hf(on_disk, prefix, EXPERTS)
    hf_experts = model.model.layers[0].mlp.experts
    torch.testing.assert_close(stacked[f"{prefix}.gate_up_proj"], hf_experts.gate_up_proj.detach())
    torch.testing.assert_close(stacked[f"{prefix}.down_proj"], hf_experts.down_proj.detach())
    assert not any(name.startswith(f"{prefix}.") for name in on_disk)  # every expert tensor was taken
    ours = _config().build()
    ours.experts.load_state_dict({k.removeprefix(f"{prefix}."): v for k, v in stacked.items()})
    again = experts_to_hf(prefix, ours.experts.gate_up_proj, ours.experts.down_proj)
    reloaded = load_file(str(tmp_path / "model.safetensors"))
    assert set(again) == {k for k in reloaded if k.startswith(f"{prefix}.")}
    for name, tensor in again.items():
        torch.testing.assert_close(tensor, reloaded[name], rtol=0, atol=0, msg=name)


def test_a_checkpoint_with_fewer_experts_than_the_config_is_refused_naming_the_tensor():
    ours = MoEFeedForwardConfig(HIDDEN, EXPERT_DIM, 4, TOP_K).build()
    tensors = experts_to_hf("m.experts", ours.experts.gate_up_proj, ours.experts.down_proj)
    with pytest.raises(TrainingConfigError, match=r"m\.experts\.4\.gate_proj\.weight.*num_experts=6"):
        experts_from_hf(tensors, "m.experts", 6)


def test_bad_block_shapes_are_refused_naming_the_field():
    with pytest.raises(TrainingConfigError, match="top_k"):
        MoEFeedForwardConfig(HIDDEN, EXPERT_DIM, 4, 5)
    with pytest.raises(TrainingConfigError, match="expert_dim"):
        MoEFeedForwardConfig(HIDDEN, 20, 4, 2)
    with pytest.raises(TrainingConfigError, match="num_experts"):
        MoEFeedForwardConfig(HIDDEN, EXPERT_DIM, 0, 1)


def test_parameter_counts_match_the_module_and_count_top_k_experts_as_active():
    config = MoEFeedForwardConfig(HIDDEN, EXPERT_DIM, EXPERTS, TOP_K, shared_expert_dim=SHARED)
    assert config.num_parameters() == sum(p.numel() for p in config.build().parameters())
    per_expert = 3 * HIDDEN * EXPERT_DIM
    assert config.num_parameters() - config.matmul_parameters() == (EXPERTS - TOP_K) * per_expert


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_torch_compile_gives_the_eager_blocks_outputs_gradients_and_counts(dtype):
    """compile traces grouped_mm in bfloat16 only; in float32 the grouped matmuls run between graphs."""
    eager = _ours_like(_hf_block("qwen3_moe")).to(dtype)
    twin = _ours_like(_hf_block("qwen3_moe")).to(dtype)
    compiled = torch.compile(twin, backend="aot_eager")
    x = torch.randn(2, 12, HIDDEN, dtype=dtype, generator=torch.Generator().manual_seed(8))
    results = []
    for block in (eager, compiled):
        out, aux = block(x)
        (out.float().square().mean() + aux["load_balancing_loss"] + aux["router_z_loss"]).backward()
        results.append((out, aux, block.gate.weight.grad))
    (out_a, aux_a, grad_a), (out_b, aux_b, grad_b) = results
    torch.testing.assert_close(out_b, out_a, rtol=0, atol=0)
    torch.testing.assert_close(grad_b, grad_a)
    assert {k: v.item() for k, v in aux_b.items()} == pytest.approx({k: v.item() for k, v in aux_a.items()})
    assert twin.take_routed_counts().tolist() == eager.take_routed_counts().tolist()
