"""Greedy generation in our own layers for an evaluation of a model we trained.

The evaluation layer cannot import training (the two pipelines meet only here), so `evaluate()` of
a train step hands the evaluation step `load_generator`: the export loaded into our own layers
(`marin.training.load_model`) and decoded by `marin.training.generate` (a batch of left-padded
prompts, one token per row per step against a KV cache), which the harness's `generate_until` tasks
and exact match then use in place of Hugging Face's `generate` (`marin.evaluation.generation`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any


def load_generator(folder: str, device: str) -> Any:
    """`(prompts, max_new_tokens, eos_id) -> new token ids` over the model of the export in `folder`."""
    from marin.training import load_model

    model, _ = load_model(folder, device=device)
    return functools.partial(_generate, model)


def _generate(
    model: Any, prompts: Sequence[Sequence[int]], max_new_tokens: int, eos_id: int | None
) -> list[list[int]]:
    from marin.training.generate import generate

    return generate(model, prompts, max_new_tokens, eos_id=eos_id)
