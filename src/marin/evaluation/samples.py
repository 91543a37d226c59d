"""Generations from given prompts: one greedy continuation and seeded temperature / top-p samples.

All rows are decoded in one batch with the model's key/value cache (`_decode_cached`). Sampling
draws from our own `torch.Generator` seeded per prompt and sample, so the samples are the same on
every rerun and do not depend on (or disturb) the process's global random state.
"""

from __future__ import annotations

import inspect
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
    """`[{"prompt", "mode", "seed", "text"}]`: the greedy continuation of each prompt, then its samples.

    Every continuation of every prompt is decoded together, one batch with a key/value cache: the
    prompts are left-padded (masked, with positions counted from each prompt's first token), each
    step feeds one new token per row. A row whose prompt and continuation would not fit the context
    is decoded alone, by recomputing the last `max_length` tokens per step. Each sample draws from
    its own generator, seeded from `seed`, the prompt's and the sample's index, so a draw does not
    depend on the batch it is in.
    """
    import torch

    rows = []  # (prompt index, ids, generator or None for greedy)
    records = []
    for p_index, prompt in enumerate(prompts):
        ids = tokenizer.encode(prompt, add_special_tokens=False)
        rows.append((ids, None))
        records.append({"prompt": prompt, "mode": "greedy", "seed": None})
        for s_index in range(config.num_samples):
            seed = config.seed + 1000 * p_index + s_index
            rows.append((ids, torch.Generator().manual_seed(seed)))
            records.append(
                {
                    "prompt": prompt,
                    "mode": f"sample(t={config.temperature},top_p={config.top_p})",
                    "seed": seed,
                }
            )
    eos = tokenizer.eos_token_id
    fits = [i for i, (ids, _) in enumerate(rows) if ids and len(ids) + config.max_new_tokens <= max_length]
    new = dict(zip(fits, _decode_cached(model, [rows[i] for i in fits], config, eos), strict=True))
    for i, (ids, generator) in enumerate(rows):
        if i not in new:
            new[i] = _continue(model, ids, config, max_length, eos, generator)
    return [{**record, "text": tokenizer.decode(new[i])} for i, record in enumerate(records)]


def _decode_cached(model, rows: list, config: SamplingConfig, eos: int | None) -> list[list[int]]:
    """New token ids of each (prompt ids, generator) row, decoded in one batch with the model's KV cache."""
    import torch

    if not rows:
        return []
    device = next(model.parameters()).device
    width = max(len(ids) for ids, _ in rows)
    pad = eos if eos is not None else 0
    input_ids = torch.tensor([[pad] * (width - len(ids)) + list(ids) for ids, _ in rows], device=device)
    mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids, _ in rows], device=device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    new: list[list[int]] = [[] for _ in rows]
    done = [False] * len(rows)
    # transformers 5 names the cache `cache`; 4.x, `past_key_values`
    name = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    past = None
    with torch.inference_mode():
        for _ in range(config.max_new_tokens):
            out = model(
                input_ids=input_ids,
                attention_mask=mask,
                position_ids=positions,
                **{name: past},
                use_cache=True,
            )
            past = getattr(out, name)
            logits = out.logits[:, -1].float().cpu()
            step = []
            for r, (_, generator) in enumerate(rows):
                token = (
                    int(logits[r].argmax()) if generator is None else _sample(logits[r], config, generator)
                )
                if not done[r]:
                    if token == eos:
                        done[r] = True
                    else:
                        new[r].append(token)
                step.append(token)
            if all(done):
                break
            input_ids = torch.tensor(step, device=device)[:, None]
            mask = torch.cat([mask, torch.ones((len(rows), 1), dtype=mask.dtype, device=device)], dim=1)
            positions = positions[:, -1:] + 1
    return new


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
