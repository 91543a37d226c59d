"""What only a GPU runs: bf16 FSDP on one device, compile per block, flex-attention document masking,
the MoE's grouped matmul, and KV-cached generation, each against what the CPU tests already check.

They skip without a CUDA device; `scripts/gpu_check.sh` runs them on one (with the MFU benchmark).
`MARIN_GPU_CHECK_DEVICE=cpu` runs the same checks on CPU (in float32 where CUDA would use bf16), which
is how `scripts/gpu_check.sh --dry-run` and `tests/test_gpu_check.py` check this file without a GPU.
"""

from __future__ import annotations

import dataclasses
import math
import os

import pytest
import torch
from train_child import tiny_config

import storage
from marin.training.callbacks import StopAfter
from marin.training.datasets import DatasetInput
from marin.training.generate import generate
from marin.training.models import LlamaConfig, architectures
from marin.training.models.moe import MoEFeedForwardConfig
from marin.training.trainer import TrainJob, train

DEVICE = os.environ.get("MARIN_GPU_CHECK_DEVICE", "cuda")
ON_CUDA = DEVICE == "cuda"
EOS = 0

pytestmark = pytest.mark.skipif(
    ON_CUDA and not torch.cuda.is_available(),
    reason="no CUDA device: scripts/gpu_check.sh runs these on a GPU (MARIN_GPU_CHECK_DEVICE=cpu: on CPU)",
)


def _tiny(cls=LlamaConfig, **fields):
    return cls(
        hidden_dim=64,
        intermediate_dim=128,
        num_layers=2,
        num_heads=4,
        num_kv_heads=2,
        vocab_size=96,
        **fields,
    )


def test_fsdp_in_bf16_on_one_device_trains_and_resumes_where_it_stopped(story_cache, tmp_path):
    datasets = (DatasetInput("stories", story_cache, 1.0),)
    run = dict(parallelism="fsdp", device=DEVICE, checkpoint_every=None, steps_per_eval=None)
    straight = train(TrainJob(tiny_config(8, **run), datasets, str(tmp_path / "straight")))
    out = str(tmp_path / "stopped")
    train(TrainJob(tiny_config(8, callbacks=(StopAfter(step=4),), **run), datasets, out))
    assert os.path.isdir(os.path.join(out, "checkpoints", "step-00000004", "dcp"))  # sharded, every rank's
    resumed = train(TrainJob(tiny_config(8, **run), datasets, out))
    assert resumed["resumed_from_step"] == 4 and resumed["steps_done"] == 8
    losses = [r["loss"] for r in storage.read_records(os.path.join(out, "metrics.jsonl"))]
    assert len(losses) == 8 and all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0]
    # bf16 compute on CUDA is not bit-exact across runs; it agrees to bf16's precision
    assert resumed["final_loss"] == pytest.approx(straight["final_loss"], rel=2e-2 if ON_CUDA else 1e-6)


def test_compiling_each_block_gives_the_eager_loss_and_gradients():
    from marin.training.blocks import compile_blocks

    torch.manual_seed(0)
    config = _tiny()
    eager = config.build().to(DEVICE)
    compiled = config.build().to(DEVICE)
    compiled.load_state_dict(eager.state_dict())
    compile_blocks(config.blocks(compiled))
    tokens = torch.randint(1, 96, (4, 65), device=DEVICE)
    losses, grads = [], []
    for model in (eager, compiled):
        loss, _ = model(tokens[:, :-1], tokens[:, 1:])
        loss.backward()
        losses.append(loss.item())
        grads.append({n: p.grad for n, p in model.named_parameters()})
    assert losses[1] == pytest.approx(losses[0], abs=1e-4)
    assert all(torch.allclose(grads[0][n], grads[1][n], atol=1e-4, rtol=1e-3) for n in grads[0])


@pytest.mark.parametrize("name", sorted(architectures()))
def test_document_masking_on_the_device_gives_a_second_document_its_logits_alone(name):
    """On CUDA the masked attention is flex_attention with a block mask (compiled once per process)."""
    torch.manual_seed(0)
    model = _tiny(architectures()[name]).build().to(DEVICE).eval()
    first, second = torch.randint(1, 96, (1, 150)), torch.randint(1, 96, (1, 170))
    first[0, -1] = EOS
    window = torch.cat([first, second], dim=1).to(DEVICE)
    with torch.no_grad():
        alone = model(second.to(DEVICE))
        masked = model(window, document_eos=EOS)[:, first.shape[1] :]
        plain = model(window)[:, first.shape[1] :]
    assert torch.allclose(masked, alone, atol=2e-3, rtol=0)
    assert not torch.allclose(plain, alone, atol=2e-2, rtol=0)


def test_the_moe_grouped_matmul_on_the_device_in_bf16_gives_the_float32_cpu_output():
    torch.manual_seed(0)
    config = MoEFeedForwardConfig(64, 96, 8, 2)
    reference = config.build()
    dtype = torch.bfloat16 if ON_CUDA else torch.float32
    device_block = config.build().to(DEVICE, dtype)
    device_block.load_state_dict(reference.state_dict())
    x = torch.randn(4, 33, 64)
    want, _ = reference(x)
    got, aux = device_block(x.to(DEVICE, dtype))
    assert got.dtype == dtype and set(aux) == {"load_balancing_loss", "router_z_loss"}
    scale = want.abs().max().item()
    assert (got.float().cpu() - want).abs().max().item() <= (3e-2 if ON_CUDA else 1e-5) * scale


def test_kv_cached_generation_on_the_device_equals_greedy_decoding_without_a_cache():
    torch.manual_seed(0)
    model = dataclasses.replace(_tiny(), max_seq_len=128).build().to(DEVICE).eval()
    prompts = [[5, 9, 14, 3], [7, 2], [11, 12, 13, 14, 15, 16]]
    cached = generate(model, prompts, max_new_tokens=12)
    for prompt, new in zip(prompts, cached, strict=True):
        tokens = list(prompt)
        with torch.no_grad():
            for _ in range(12):
                logits = model(torch.tensor([tokens], device=DEVICE))[0, -1]
                tokens.append(int(logits.float().argmax()))
        assert new == tokens[len(prompt) :]
