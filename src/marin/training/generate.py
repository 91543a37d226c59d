"""Generation with our own models and their KV cache: `generate(model, prompts, max_new_tokens)`.

`model` is what `marin.training.load_model(path)` returns (any architecture: they share
`models.decoder.Decoder`). The prompts are left-padded into one batch and fed once; then each step
feeds one new token per row against the cache (`models.layers.KVCache`), whose mask keeps each row
to its own real tokens and whose positions continue each row's, so a row decodes exactly as it
would alone. Greedy by default; `choose` picks each step's tokens otherwise (a sampler). Rows stop
at `eos_id` or after `max_new_tokens`. RoPE has no table to outgrow, so nothing stops a row at the
model's `max_seq_len`; past it, the model sees positions it never trained on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from marin.training.errors import TrainingConfigError
from marin.training.models.layers import KVCache


def generate(
    model: nn.Module,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    *,
    eos_id: int | None = None,
    choose: Callable[[torch.Tensor], Sequence[int]] | None = None,
) -> list[list[int]]:
    """The new token ids of each prompt (EOS not included), decoded in one batch with a KV cache.

    `choose(logits)` takes the (rows, vocab) float32 logits of a step and returns one token per row;
    the default is greedy (argmax). A row that has reached EOS keeps being fed (its tokens ignored),
    so `choose` always sees every row.
    """
    if not prompts or any(len(p) == 0 for p in prompts):
        raise TrainingConfigError("generate: every prompt needs at least one token")
    device = next(model.parameters()).device
    width = max(len(p) for p in prompts)
    pad = eos_id if eos_id is not None else 0
    tokens = torch.tensor([[pad] * (width - len(p)) + list(p) for p in prompts], device=device)
    valid = torch.tensor([[False] * (width - len(p)) + [True] * len(p) for p in prompts], device=device)
    cache = KVCache(len(model.layers), capacity=width + max_new_tokens)
    new: list[list[int]] = [[] for _ in prompts]
    done = [False] * len(prompts)
    with torch.inference_mode():
        for _ in range(max_new_tokens):
            logits = model(tokens, cache=cache, valid=valid, last=True)[:, -1].float()
            chosen = logits.argmax(-1) if choose is None else None
            step = chosen.tolist() if chosen is not None else [int(t) for t in choose(logits)]
            for row, token in enumerate(step):
                if done[row]:
                    continue
                if token == eos_id:
                    done[row] = True
                else:
                    new[row].append(token)
            if all(done):
                break
            tokens = chosen[:, None] if chosen is not None else torch.tensor(step, device=device)[:, None]
            valid = None
    return new
