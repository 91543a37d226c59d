"""Preference pairs as DPO batches: each answer after its prompt in a row of its own, its tokens the targets.

A pair becomes two rows, `prompt + chosen` and `prompt + rejected`, each rendered by the chat template
(`render_chat`, scoring only the answer's turns, not the prompt's), followed by EOS and padded with
EOS to `seq_len + 1` tokens. Only the answer's tokens are targets, so a row's summed log-probability
is log pi(answer | prompt). A pair longer than a window is skipped (and counted): cutting it would
cut the answer or the prompt it answers. Rows are interleaved, chosen then rejected, so any split of
a rank's rows into microbatches keeps pairs together. Every epoch takes the pairs in a fresh seeded
order; every rank draws the same global batch and keeps its own pairs, and the state is small.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from marin.data.chat import PreferencePair
from marin.data.chat_template import render_chat
from marin.posttrain.chat_batches import EpochCursor, shifted_targets


@dataclass(frozen=True)
class RenderedPairs:
    """`2 * count` rows of `width` tokens (chosen, rejected, chosen, ...) and their target flags."""

    tokens: np.ndarray  # int32 (2 * count, width)
    flags: np.ndarray  # bool, same shape
    skipped: int  # pairs longer than a window, left out

    @property
    def count(self) -> int:
        return self.tokens.shape[0] // 2


def _row(tokenizer: Any, prompt: list[dict], answer: list[dict], eos_id: int, width: int):
    rendered = render_chat(tokenizer, prompt + answer, score_from=len(prompt))
    if len(rendered.ids) + 1 > width:
        return None
    tokens = np.full(width, eos_id, dtype=np.int32)
    flags = np.zeros(width, dtype=bool)
    tokens[: len(rendered.ids)] = rendered.ids
    flags[: len(rendered.ids)] = rendered.assistant
    return tokens, flags


def render_pairs(tokenizer: Any, pairs: Iterable[PreferencePair], eos_id: int, width: int) -> RenderedPairs:
    """Render each pair as two rows of `width` tokens; pairs that do not fit are skipped."""
    tokens, flags, skipped = [], [], 0
    for pair in pairs:
        chosen = _row(tokenizer, pair.prompt, pair.chosen, eos_id, width)
        rejected = _row(tokenizer, pair.prompt, pair.rejected, eos_id, width)
        if chosen is None or rejected is None:
            skipped += 1
            continue
        for t, f in (chosen, rejected):
            tokens.append(t)
            flags.append(f)
    if not tokens:
        return RenderedPairs(np.zeros((0, width), np.int32), np.zeros((0, width), bool), skipped)
    return RenderedPairs(np.stack(tokens), np.stack(flags), skipped)


class PairBatches(EpochCursor):
    """Draws global batches of `batch_size` pairs (see the module docstring); `shuffle=False` keeps their order."""

    def __init__(
        self,
        pairs: RenderedPairs,
        *,
        batch_size: int,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
        shuffle: bool = True,
    ):
        if pairs.count == 0:
            raise ValueError("no preference pairs to train on")
        self.pairs, self.batch_size, self.seed = pairs, batch_size, seed
        self.rank, self.world_size, self.shuffle = rank, world_size, shuffle
        self._epoch, self._cursor = 0, 0
        self._order: tuple[int, np.ndarray] | None = None

    @property
    def epoch(self) -> int:
        return self._epoch

    def _next_pair(self) -> int:
        if self._order is None or self._order[0] != self._epoch:
            n = self.pairs.count
            order = (
                np.random.Generator(np.random.PCG64([self.seed, self._epoch])).permutation(n)
                if self.shuffle
                else np.arange(n)
            )
            self._order = (self._epoch, order)
        pair = int(self._order[1][self._cursor])
        self._cursor += 1
        if self._cursor == self.pairs.count:
            self._epoch, self._cursor = self._epoch + 1, 0
        return pair

    def next_batch(self) -> tuple[np.ndarray, np.ndarray]:
        """This rank's inputs and targets: (2 * pairs, seq_len) each, chosen and rejected interleaved."""
        picks = [self._next_pair() for _ in range(self.batch_size)]
        per_rank = self.batch_size // self.world_size
        mine = picks[self.rank * per_rank : (self.rank + 1) * per_rank]
        rows = np.array([2 * p + side for p in mine for side in (0, 1)])
        tokens = self.pairs.tokens[rows].astype(np.int64)
        return tokens[:, :-1], shifted_targets(tokens, self.pairs.flags[rows])
