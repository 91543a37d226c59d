"""What wraps each block: activation checkpointing keeps the numbers and lowers peak memory; compile
and checkpointing keep parameter names and outputs; compile="auto" means CUDA only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch

from experiments.models import NANO
from marin.training.blocks import checkpoint_blocks, compile_blocks, compile_wanted

ROOT = Path(__file__).resolve().parents[3]


def test_activation_checkpointing_keeps_loss_and_gradients_and_lowers_peak_memory():
    script = ROOT / "benchmarks" / "activation_checkpointing_memory.py"
    done = subprocess.run(
        [sys.executable, str(script), "--small"], capture_output=True, text=True, timeout=600, check=True
    )
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["max_loss_difference"] <= 1e-6
    for sums in (result["grad_sums"], result["grad_abs_sums"]):
        assert max(sums.values()) - min(sums.values()) <= 1e-6 * max(abs(v) for v in sums.values())
    peak = result["peak_tensor_mib"]
    assert peak["full"] < peak["selective"] < peak["none"]  # measured on CPU, from the allocator's events
    assert result["ratio_full_vs_none"] <= 0.6


def test_compiled_and_checkpointed_blocks_keep_their_names_and_their_outputs():
    config = NANO["qwen3"].with_vocab_size(97)
    torch.manual_seed(0)
    plain = config.build()
    torch.manual_seed(0)
    wrapped = config.build()
    blocks = config.blocks(wrapped)
    checkpoint_blocks(blocks, "full")
    compile_blocks(blocks, backend="eager")  # dynamo's tracing without a C++ toolchain
    assert [n for n, _ in wrapped.named_parameters()] == [n for n, _ in plain.named_parameters()]
    tokens = torch.randint(0, 97, (2, 24), generator=torch.Generator().manual_seed(1))
    (a, _), (b, _) = plain(tokens, tokens), wrapped(tokens, tokens)
    a.backward()
    b.backward()
    assert torch.equal(a, b)
    for (name, p), q in zip(plain.named_parameters(), wrapped.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-6, atol=1e-7, msg=name)


def test_compile_auto_is_on_for_cuda_and_off_on_cpu():
    assert compile_wanted("auto", torch.device("cuda", 0)) and not compile_wanted("auto", torch.device("cpu"))
    assert compile_wanted(True, torch.device("cpu")) and not compile_wanted(False, torch.device("cuda", 0))
