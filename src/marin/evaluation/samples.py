"""Generations from given prompts: one greedy continuation and seeded temperature / top-p samples.

Sampling draws from our own `torch.Generator` seeded per prompt and sample, so the samples are the
same on every rerun and do not depend on (or disturb) the process's global random state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class SamplingConfig:
    """How to continue each prompt: `num_samples` draws at `temperature` with nucleus `top_p`, plus greedy."""

    # keyed even at their defaults: these keys were published before defaults stayed out (marin.execution.keyed)
    KEYED_AT_DEFAULT: ClassVar[tuple[str, ...]] = (
        "max_new_tokens",
        "temperature",
        "top_p",
        "num_samples",
        "seed",
    )

    max_new_tokens: int = 48
    temperature: float = 0.8
    top_p: float = 0.95
    num_samples: int = 2
    seed: int = 0


def generate_samples(
    model, tokenizer, prompts: Sequence[str], config: SamplingConfig, max_length: int
) -> list[dict]:
    """`[{"prompt", "mode", "seed", "text"}]`: the greedy continuation of each prompt, then its samples."""
    import torch

    records = []
    for p_index, prompt in enumerate(prompts):
        ids = tokenizer.encode(prompt, add_special_tokens=False)
        records.append(
            {
                "prompt": prompt,
                "mode": "greedy",
                "seed": None,
                "text": tokenizer.decode(
                    _continue(model, ids, config, max_length, tokenizer.eos_token_id, None)
                ),
            }
        )
        for s_index in range(config.num_samples):
            seed = config.seed + 1000 * p_index + s_index
            generator = torch.Generator().manual_seed(seed)
            new = _continue(model, ids, config, max_length, tokenizer.eos_token_id, generator)
            records.append(
                {
                    "prompt": prompt,
                    "mode": f"sample(t={config.temperature},top_p={config.top_p})",
                    "seed": seed,
                    "text": tokenizer.decode(new),
                }
            )
    return records


def _continue(
    model, ids: list[int], config: SamplingConfig, max_length: int, eos: int | None, generator
) -> list[int]:
    """New token ids after `ids`; greedy when `generator` is None. Stops at EOS or the context's end."""
    import torch

    device = next(model.parameters()).device
    tokens = list(ids)
    new: list[int] = []
    with torch.inference_mode():
        for _ in range(config.max_new_tokens):
            window = tokens[-max_length:]  # keep the context within the model's positions
            logits = model(torch.tensor([window], device=device)).logits[0, -1].float().cpu()
            token = int(logits.argmax()) if generator is None else _sample(logits, config, generator)
            if token == eos:
                break
            tokens.append(token)
            new.append(token)
    return new


def _sample(logits, config: SamplingConfig, generator) -> int:
    """Draw from softmax(logits / temperature), restricted to the smallest set with mass >= top_p."""
    import torch

    probs = torch.softmax(logits / max(config.temperature, 1e-6), dim=-1)
    sorted_probs, order = torch.sort(probs, descending=True)
    # Keep a token while the mass before it is below top_p, so the most likely token always stays.
    keep = (torch.cumsum(sorted_probs, dim=0) - sorted_probs) < config.top_p
    sorted_probs = sorted_probs * keep
    choice = torch.multinomial(sorted_probs / sorted_probs.sum(), 1, generator=generator)
    return int(order[choice])
