"""Conversations as training batches: rendered once, packed whole into fixed windows, targets only on replies.

Each conversation is rendered by the tokenizer's chat template (`marin.data.chat_template.render_chat`)
and followed by EOS, which ends it as a document (document masking keeps attention inside it). A
conversation longer than a window is cut to the window (and counted). Every epoch the conversations
are taken in a fresh seeded order and packed greedily: each goes into the current window if it fits,
else the window is closed (its rest filled with EOS, never a target) and a new one begins. So no
conversation is split across windows, and the packing is a pure function of the seed and the epoch.

A window row holds `seq_len + 1` tokens and as many booleans saying which tokens are targets; the
model reads tokens[:-1] and is scored on tokens[1:] where the mask is set, every other target being
IGNORE_INDEX (-100), which the causal-LM loss skips. Like the pretraining loader, every rank draws the same
global batch and keeps its own rows, and the state (epoch, cursor) is small and checkpointed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from marin.data.chat_template import render_chat
from marin.training.models.layers import IGNORE_INDEX


@dataclass(frozen=True)
class RenderedConversations:
    """Conversations as one flat array of ids and one of target flags, cut at `offsets` (n + 1 of them)."""

    ids: np.ndarray
    targets: np.ndarray
    offsets: np.ndarray
    truncated: int  # conversations cut to fit a window
    dropped: int = 0  # conversations left with no target once cut, so left out

    @property
    def count(self) -> int:
        return len(self.offsets) - 1

    @property
    def num_tokens(self) -> int:
        return int(self.offsets[-1])

    @property
    def num_target_tokens(self) -> int:
        return int(self.targets.sum())

    def conversation(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = self.offsets[i], self.offsets[i + 1]
        return self.ids[a:b], self.targets[a:b]


def render_conversations(
    tokenizer: Any, conversations: Iterable[list[dict]], eos_id: int, max_tokens: int
) -> RenderedConversations:
    """Render each conversation, append EOS (not a target), and cut it to `max_tokens` tokens.

    A conversation whose cut leaves none of its replies' tokens is left out (and counted): it has
    nothing to learn from, and a window of such rows would have no target at all."""
    ids, flags, lengths, truncated, dropped = [], [], [0], 0, 0
    for messages in conversations:
        rendered = render_chat(tokenizer, messages)
        seq = np.append(rendered.ids, eos_id)
        mask = np.append(rendered.assistant, False)
        if len(seq) > max_tokens:
            seq, mask, truncated = seq[:max_tokens], mask[:max_tokens], truncated + 1
            if not mask[1:].any():
                dropped += 1
                continue
        ids.append(seq)
        flags.append(mask)
        lengths.append(len(seq))
    if len(lengths) == 1:
        return RenderedConversations(
            np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(1, np.int64), truncated, dropped
        )
    return RenderedConversations(
        np.concatenate(ids).astype(np.int64),
        np.concatenate(flags),
        np.cumsum(lengths, dtype=np.int64),
        truncated,
        dropped,
    )


def shifted_targets(tokens: np.ndarray, is_target: np.ndarray) -> np.ndarray:
    """Next-token targets for `tokens[..., :-1]`: `tokens[..., 1:]` where that token is a target, else IGNORE_INDEX."""
    return np.where(is_target[..., 1:], tokens[..., 1:], IGNORE_INDEX)


class EpochCursor:
    """A seeded loader's place (its seed, epoch, and position in the epoch's order): what a checkpoint
    saves so that a resumed run draws the batches an uninterrupted one would."""

    seed: int
    _epoch: int
    _cursor: int

    def state_dict(self) -> dict:
        return {"seed": self.seed, "epoch": self._epoch, "cursor": self._cursor}

    def load_state_dict(self, state: dict) -> None:
        if state["seed"] != self.seed:
            raise ValueError(f"loader state is for seed {state['seed']}, this run's seed is {self.seed}")
        self._epoch, self._cursor = int(state["epoch"]), int(state["cursor"])


class PackedChats(EpochCursor):
    """Draws global batches of packed windows of whole conversations; see the module docstring.

    `shuffle=False` takes the conversations in their order, every epoch (validation).
    """

    def __init__(
        self,
        data: RenderedConversations,
        *,
        seq_len: int,
        batch_size: int,
        seed: int,
        eos_id: int,
        rank: int = 0,
        world_size: int = 1,
        shuffle: bool = True,
    ):
        if data.count == 0:
            raise ValueError("no conversations to train on")
        self.data, self.seq_len, self.batch_size, self.seed = data, seq_len, batch_size, seed
        self.eos_id, self.rank, self.world_size, self.shuffle = eos_id, rank, world_size, shuffle
        self._epoch, self._cursor = 0, 0
        self._order: tuple[int, np.ndarray] | None = None

    def _permutation(self) -> np.ndarray:
        if self._order is None or self._order[0] != self._epoch:
            if self.shuffle:
                order = np.random.Generator(np.random.PCG64([self.seed, self._epoch])).permutation(
                    self.data.count
                )
            else:
                order = np.arange(self.data.count)
            self._order = (self._epoch, order)
        return self._order[1]

    @property
    def epoch(self) -> int:
        """Whole passes over the conversations so far."""
        return self._epoch

    def next_window(self) -> tuple[np.ndarray, np.ndarray]:
        """The next window of the sequence: `seq_len + 1` tokens and their target flags."""
        width = self.seq_len + 1
        tokens = np.full(width, self.eos_id, dtype=np.int64)
        mask = np.zeros(width, dtype=bool)
        used = 0
        while True:
            order = self._permutation()
            ids, flags = self.data.conversation(int(order[self._cursor]))
            if used and used + len(ids) > width:
                return tokens, mask
            n = min(len(ids), width)
            tokens[used : used + n], mask[used : used + n] = ids[:n], flags[:n]
            used += n
            self._cursor += 1
            if self._cursor == self.data.count:
                self._epoch, self._cursor = self._epoch + 1, 0
            if used == width:
                return tokens, mask

    def next_windows(self) -> tuple[np.ndarray, np.ndarray]:
        """This rank's rows of the next global batch: tokens (rows, seq_len + 1) int64 and their target flags."""
        windows = [self.next_window() for _ in range(self.batch_size)]
        per_rank = self.batch_size // self.world_size
        mine = windows[self.rank * per_rank : (self.rank + 1) * per_rank]
        return np.stack([t for t, _ in mine]), np.stack([m for _, m in mine])

    def next_batch(self) -> tuple[np.ndarray, np.ndarray]:
        """This rank's inputs and targets (IGNORE_INDEX but on reply tokens) of the next global batch."""
        tokens, flags = self.next_windows()
        return tokens[:, :-1], shifted_targets(tokens, flags)
