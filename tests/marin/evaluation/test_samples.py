"""Generation samples: greedy matches Hugging Face's generate, sampling is seeded and reproducible."""

from __future__ import annotations

import torch

from marin.evaluation.checkpoint import load_hf_model
from marin.evaluation.samples import SamplingConfig, generate_samples

PROMPTS = ("Once upon a time, a girl named Lena", "The sky was quiet")


def test_greedy_continuation_equals_transformers_generate(tiny_export):
    loaded = load_hf_model(tiny_export)
    config = SamplingConfig(max_new_tokens=12, num_samples=0)
    records = generate_samples(loaded.model, loaded.tokenizer, PROMPTS, config, loaded.max_length)
    assert [r["mode"] for r in records] == ["greedy", "greedy"]
    for record, prompt in zip(records, PROMPTS, strict=True):
        ids = torch.tensor([loaded.tokenizer.encode(prompt, add_special_tokens=False)])
        out = loaded.model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=False,
            max_new_tokens=12,
            eos_token_id=loaded.tokenizer.eos_token_id,
            pad_token_id=loaded.tokenizer.eos_token_id,
        )
        expected = [t for t in out[0, ids.shape[1] :].tolist() if t != loaded.tokenizer.eos_token_id]
        assert record["text"] == loaded.tokenizer.decode(expected)


def test_samples_are_reproducible_per_seed_and_differ_across_seeds(tiny_export):
    loaded = load_hf_model(tiny_export)
    config = SamplingConfig(max_new_tokens=16, temperature=1.0, top_p=0.95, num_samples=3, seed=7)
    first = generate_samples(loaded.model, loaded.tokenizer, PROMPTS, config, loaded.max_length)
    again = generate_samples(loaded.model, loaded.tokenizer, PROMPTS, config, loaded.max_length)
    assert first == again
    sampled = [r["text"] for r in first if r["mode"] != "greedy"]
    assert len(sampled) == 6 and len(set(sampled)) > 1


def test_top_p_near_zero_keeps_only_the_most_likely_token(tiny_export):
    loaded = load_hf_model(tiny_export)
    greedy = generate_samples(
        loaded.model,
        loaded.tokenizer,
        PROMPTS[:1],
        SamplingConfig(max_new_tokens=10, num_samples=0),
        loaded.max_length,
    )
    narrow = generate_samples(
        loaded.model,
        loaded.tokenizer,
        PROMPTS[:1],
        SamplingConfig(max_new_tokens=10, temperature=1.5, top_p=1e-9, num_samples=2),
        loaded.max_length,
    )
    assert {r["text"] for r in narrow} == {greedy[0]["text"]}


def test_batched_cached_decoding_keeps_the_window_decoders_greedy_text(tiny_export, stories):
    """Prompts of different lengths decoded in one left-padded batch against the KV cache give what
    recomputing the window for every token gave; a prompt too long for the cache falls back to it."""
    from marin.evaluation.samples import _continue

    loaded = load_hf_model(tiny_export)
    config = SamplingConfig(max_new_tokens=14, num_samples=0)
    prompts = (*PROMPTS, "Tom", stories[0][:400])  # the last is longer than the context
    records = generate_samples(loaded.model, loaded.tokenizer, prompts, config, loaded.max_length)
    eos = loaded.tokenizer.eos_token_id
    for record, prompt in zip(records, prompts, strict=True):
        ids = loaded.tokenizer.encode(prompt, add_special_tokens=False)
        expected = _continue(loaded.model, ids, config, loaded.max_length, eos, None)
        assert record["text"] == loaded.tokenizer.decode(expected), prompt
