"""The "which ending fits this story?" multiple-choice items, built deterministically from stories.

Each item keeps a story's sentences but the last as the context; the choices are its true last
sentence and the last sentences of other stories, shuffled by a seeded generator.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def split_ending(text: str) -> tuple[str, str] | None:
    """(everything before the last sentence, the last sentence), or None for a one-sentence text."""
    text = text.strip()
    breaks = list(_SENTENCE_END.finditer(text))
    if not breaks:
        return None
    return text[: breaks[-1].start()], text[breaks[-1].end() :]


def story_ending_items(
    stories: Sequence[str], num_items: int, num_choices: int = 4, seed: int = 0
) -> list[dict]:
    """Up to `num_items` items `{"context", "choices", "label"}`; the same inputs always give the same items."""
    parts = [p for p in (split_ending(s) for s in stories) if p is not None]
    endings = list(dict.fromkeys(ending for _, ending in parts))
    if len(endings) < num_choices:
        raise ValueError(f"story endings need at least {num_choices} distinct endings, got {len(endings)}")
    rng = random.Random(seed)
    items = []
    for context, ending in parts[:num_items]:
        others = [e for e in endings if e != ending]
        choices = [ending, *rng.sample(others, num_choices - 1)]
        rng.shuffle(choices)
        items.append({"context": context, "choices": choices, "label": choices.index(ending)})
    return items
