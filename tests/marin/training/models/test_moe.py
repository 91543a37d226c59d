"""The `moe` architecture: its counts, its aux losses against Hugging Face's model, its HF exports and
their limits, and training: aux losses and per-expert token fractions in metrics.jsonl, and 2-process
FSDP computing what one process does over the same microbatches.

(That our export and HF's saved models agree to 1e-5 both ways is tests/.../test_models_against_hf.py,
with the other architectures; that moe_nano learns and resumes bit-identically is test_architectures.py.)
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os

import pytest
import torch
import transformers

import storage
from experiments import models as sizes
from fray.cluster import LocalCluster, ResourceConfig
from marin.training.config import TrainConfig
from marin.training.datasets import DatasetInput
from marin.training.errors import TrainingConfigError
from marin.training.export import export_hf
from marin.training.launch import run_job
from marin.training.models import MoEConfig, config_from_hf, config_from_json, config_to_json, model_key
from marin.training.models.moe import MoEFormat
from marin.training.optim import AdamConfig
from marin.training.schedules import Cosine
from marin.training.trainer import TrainJob

SHAPE = dict(hidden_dim=32, intermediate_dim=16, num_layers=2, num_heads=4, num_kv_heads=2, vocab_size=97)


@pytest.mark.parametrize("name", sorted(sizes.ACTIVE_PARAMETER_COUNTS))
def test_documented_active_parameters_of_the_moe_sizes_are_what_a_token_uses(name):
    """(Their total counts are test_sizes.py's, with every architecture's.)"""
    config = getattr(sizes, name).with_vocab_size(sizes.REFERENCE_VOCAB_SIZE)
    with torch.device("meta"):
        model = config.build()
    idle_experts = config.num_experts - config.top_k
    unused = (
        sum(p.numel() for n, p in model.named_parameters() if ".experts." in n)
        * idle_experts
        // config.num_experts
    )
    active = (config.active_parameters(), config.active_parameters(include_embeddings=False))
    assert active[0] == sum(p.numel() for p in model.parameters()) - unused
    assert active == sizes.ACTIVE_PARAMETER_COUNTS[name]
    assert all(f"{n:,}" in sizes.__doc__ for n in active)


def test_counts_separate_all_parameters_from_the_ones_a_token_uses():
    config = MoEConfig(**SHAPE, num_experts=8, top_k=2)
    model = config.build()
    assert config.num_parameters() == sum(p.numel() for p in model.parameters())
    expert = 3 * 32 * 16
    assert config.num_parameters() - config.active_parameters() == 2 * (8 - 2) * expert
    dense_equivalent = dataclasses.replace(config, num_experts=2, top_k=2)  # every expert active
    assert (
        config.flops_per_token(64) == dense_equivalent.flops_per_token(64) + 6 * 2 * (8 - 2) * 32
    )  # routers


def test_the_config_round_trips_through_checkpoint_records_and_is_keyed_as_moe():
    config = MoEConfig(**SHAPE, top_k=1, normalize_top_k=True, hf_format="qwen3_moe")
    assert config.hf_format is MoEFormat.QWEN3_MOE
    assert config_from_json(json.loads(json.dumps(config_to_json(config)))) == config
    key = model_key(config)
    assert key["architecture"] == "moe" and key["hf_format"] == "qwen3_moe" and "num_experts" not in key


def test_one_layer_aux_loss_equals_hf_olmoes_and_the_coefficient_weights_the_mean_over_layers(tmp_path):
    one_layer = MoEConfig(**SHAPE | {"num_layers": 1}, load_balancing_coef=0.5, router_z_coef=0.0)
    torch.manual_seed(0)
    ours = one_layer.build()
    export_hf(ours, one_layer, str(tmp_path))
    theirs = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path), dtype=torch.float32)
    tokens = torch.randint(0, 97, (2, 24), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        _, aux = ours(tokens, tokens)
        hf_aux = theirs(tokens, output_router_logits=True).aux_loss
    torch.testing.assert_close(aux["load_balancing_loss"], 0.5 * hf_aux)
    assert aux["router_z_loss"].item() == 0.0
    deeper = MoEConfig(**SHAPE | {"num_layers": 4}, load_balancing_coef=0.5, router_z_coef=0.2)
    weights = {
        (b.mlp.config.load_balancing_weight, b.mlp.config.router_z_weight) for b in deeper.build().layers
    }
    assert weights == {(0.5 / 4, 0.2 / 4)}  # the layers' sum is the coefficient times their mean


def test_hf_configs_ours_cannot_hold_are_refused_naming_the_field():
    qwen = transformers.Qwen3MoeConfig(
        hidden_size=32, moe_intermediate_size=16, num_experts=4, num_attention_heads=4, mlp_only_layers=[1]
    ).to_dict()
    with pytest.raises(TrainingConfigError, match="mlp_only_layers"):
        config_from_hf(qwen)
    olmoe = transformers.OlmoeConfig(
        hidden_size=32, intermediate_size=16, num_attention_heads=4, clip_qkv=8.0
    )
    with pytest.raises(TrainingConfigError, match="clip_qkv"):
        config_from_hf(olmoe.to_dict())
    with pytest.raises(TrainingConfigError, match="olmoe"):  # OLMoE's QK-norm spans hidden_dim
        MoEConfig(**SHAPE, head_dim=16)
    with pytest.raises(TrainingConfigError, match="intermediate_dim"):
        MoEConfig(**SHAPE | {"intermediate_dim": 20})
    with pytest.raises(TrainingConfigError, match="qwen2_moe"):  # only Qwen2-MoE's class has a shared expert
        MoEConfig(**SHAPE, shared_expert_dim=24)
    with pytest.raises(TrainingConfigError, match="shared_expert_dim=0"):
        MoEConfig(**SHAPE, hf_format="qwen2_moe")
    biased = transformers.Qwen2MoeConfig(hidden_size=32, moe_intermediate_size=16, num_attention_heads=4)
    with pytest.raises(TrainingConfigError, match="qkv_bias"):
        config_from_hf(biased.to_dict())


STEPS = 10


def _run_config(**overrides) -> TrainConfig:
    model = MoEConfig(
        hidden_dim=32, intermediate_dim=32, num_layers=2, num_heads=4, num_kv_heads=2, max_seq_len=64
    )
    fields = dict(
        model=model,
        optimizer=AdamConfig(learning_rate=3e-3, weight_decay=0.1, schedule=Cosine(warmup=2)),
        batch_size=4,
        seq_len=32,
        num_train_steps=STEPS,
        seed=3,
        steps_per_eval=None,
        eval_max_tokens=512,
        checkpoint_every=None,
        cpu_threads=1,
    )
    return TrainConfig(**fields | overrides)


def _records(out: str) -> list[dict]:
    return storage.read_records(os.path.join(out, "metrics.jsonl"))


@pytest.mark.timeout(600)
def test_two_process_fsdp_matches_one_process_over_the_same_microbatches_with_aux_losses_and_fractions(
    story_cache, tmp_path
):
    """The load-balancing loss is a statistic of the batch one forward sees, so the one-process run
    splits its batch into the two halves the two processes get (grad_accum_steps=2)."""
    datasets = (DatasetInput("stories", story_cache, 1.0),)
    single, sharded = str(tmp_path / "single"), str(tmp_path / "fsdp")
    run_job(TrainJob(_run_config(grad_accum_steps=2), datasets, single))
    cluster = LocalCluster(cpu=2)
    try:
        summary = cluster.submit(
            functools.partial(run_job, TrainJob(_run_config(parallelism="fsdp"), datasets, sharded), 1),
            name="train-moe-fsdp",
            resources=ResourceConfig.with_cpu(1, replicas=2),
        ).result(timeout=540)
    finally:
        cluster.shutdown()
    assert (summary["world_size"], summary["parallelism"]) == (2, "fsdp")
    one, two = _records(single), _records(sharded)
    assert len(one) == len(two) == STEPS
    fractions = [f"expert_fraction_{e}" for e in range(8)]
    for a, b in zip(one, two, strict=True):
        for name in ("loss", "load_balancing_loss", "router_z_loss", *fractions):
            assert a[name] == pytest.approx(b[name], rel=1e-5), (a["step"], name)
        assert sum(a[f] for f in fractions) == pytest.approx(1.0)
        assert a["expert_fraction_min"] <= min(a[f] for f in fractions) <= max(a[f] for f in fractions)
        assert max(a[f] for f in fractions) <= a["expert_fraction_max"] <= 1.0
    assert 0.0 < one[0]["load_balancing_loss"] < 0.01 * 2 * 8  # coef 0.01 times a loss between k and k·E
    assert one[-1]["loss"] < one[0]["loss"]
