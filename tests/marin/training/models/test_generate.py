"""KV-cached generation in our own layers (`marin.training.generate`): a batch of left-padded prompts
decodes greedily to the very tokens Hugging Face's `generate` gives each prompt alone on our export."""

from __future__ import annotations

import pytest
import torch
import transformers

from marin.training.errors import TrainingConfigError
from marin.training.export import export_hf
from marin.training.generate import generate
from marin.training.models import LlamaConfig, Olmo2Config, Qwen3Config

VOCAB = 97
SHAPE = dict(hidden_dim=64, intermediate_dim=96, num_layers=2, num_heads=4, vocab_size=VOCAB, max_seq_len=64)
CASES = {
    "llama-gqa": LlamaConfig(**SHAPE, num_kv_heads=2),
    "qwen3-qk-norm": Qwen3Config(**SHAPE, num_kv_heads=2, head_dim=32),
    "olmo2-post-norm": Olmo2Config(**SHAPE, num_kv_heads=2),
}
NEW = 12


def _sharpened(config):
    """A random model whose logits have clear winners (the default init's are nearly flat, where
    rounding alone could tie-break greedy decoding differently) and whose greedy text does not fall
    into repeating one token: at these seeds every step's top two logits differ by > 0.01, and each
    row's 12 new tokens hold 6 to 11 distinct ids."""
    torch.manual_seed(0)
    model = config.build().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.uniform_(0.5, 1.5)
            else:
                p.normal_(0.0, 1.0 if "embed_tokens" in name or "lm_head" in name else 0.2)
    return model


@pytest.mark.parametrize("name", sorted(CASES))
def test_cached_batched_greedy_generation_equals_hugging_faces_generate(tmp_path, name):
    config = CASES[name]
    ours = _sharpened(config)
    export_hf(ours, config, str(tmp_path))
    theirs = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path), dtype=torch.float32).eval()
    theirs.generation_config.eos_token_id = None  # neither side stops early
    g = torch.Generator().manual_seed(2)
    prompts = [torch.randint(0, VOCAB, (n,), generator=g).tolist() for n in (5, 1, 11)]

    got = generate(ours, prompts, NEW)
    assert all(len(set(new)) >= 6 for new in got)
    for prompt, new in zip(prompts, got, strict=True):
        with torch.no_grad():
            out = theirs.generate(torch.tensor([prompt]), max_new_tokens=NEW, do_sample=False, pad_token_id=0)
        assert new == out[0, len(prompt) :].tolist()


def test_generation_stops_each_row_at_eos_and_rejects_an_empty_prompt():
    model = _sharpened(CASES["llama-gqa"])
    prompts = [[3, 4, 5], [7]]
    free = generate(model, prompts, NEW)
    eos = free[0][2]  # the third token row 0 would generate
    stopped = generate(model, prompts, NEW, eos_id=eos)
    assert stopped[0] == free[0][:2]
    row1 = free[1][: free[1].index(eos)] if eos in free[1] else free[1]
    assert stopped[1] == row1
    with pytest.raises(TrainingConfigError, match="at least one token"):
        generate(model, [[1], []], 4)
