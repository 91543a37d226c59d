"""The story generator: story `i` is a pure function of `i`, built from one of several story arcs.

Each story picks a cast (a hero, a friend), a place, an object, the weather and a time from
`lexicon` (`scene.py`), then one arc (`arcs.py`: a lost thing found, a new friend, a fear faced,
a skill learned, ...), each sentence slot choosing among a few phrasings. The seeded
`random.Random(i)` makes it stable across runs, processes and platforms.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from marin.data.corpus import lexicon as lx
from marin.data.corpus.arcs import ARCS
from marin.data.corpus.scene import Scene, cap, draw_scene

SOURCE_NAME = "marin://tinystories-synth"
"""The source name `tokenized(source=...)` accepts for this corpus."""

CORPUS_SIZE = 50_000
"""How many stories the embedded source holds (story(i) is defined for any i >= 0)."""

_SEED_MIX = 0x5EED_57_0E1


def _opening(rng: random.Random, s: Scene) -> list[str]:
    h = s.hero
    first = rng.choice(
        (
            f"{s.time}, there was {h.intro}.",
            f"{s.time}, {h.intro} woke up early.",
            f"{s.time}, {h.intro} went to {s.place}.",
            f"There once was {h.intro} who loved {s.place}.",
        )
    )
    second = rng.choice(
        (
            f"It was a {s.weather} day, and {h.p.subj} felt {s.happy}.",
            f"The day was {s.weather}.",
            f"{cap(h.p.subj)} had a {s.thing_adj} {s.thing} that {h.p.subj} loved very much.",
            f"{h.name} liked to {s.activity} {s.prep} {s.place}.",
            f"The sky was {s.weather} and the air smelled of {s.food}.",
        )
    )
    return [first, second]


def _closing(rng: random.Random, s: Scene) -> list[str]:
    h, f = s.hero, s.friend
    options = [
        f"From that day on, {h.name} and {f.name} were best friends.",
        f"{h.name} learned {rng.choice(lx.LESSONS)}.",
        f"That night, {h.name} went to sleep with a big smile.",
        "The end.",
        f"{h.name} felt {s.happy}, and the {s.weather} day was perfect.",
        f"They went home and ate {s.food} together.",
    ]
    picked = rng.sample(options, k=rng.choice((1, 2)))
    return picked


@dataclass(frozen=True)
class StoryRecord:
    """One story with what its generator knows about it: the cast and setting, and which arc it follows.

    Questions about a story whose answers are known (`marin.data.tinystories_qa`) are asked from these.
    """

    index: int
    scene: Scene
    arc: str  # the arc's name: "lost_thing", "new_friend", "fear", "sharing", "skill", ...
    text: str


def story_record(i: int, seed: int = 0) -> StoryRecord:
    """The `i`-th story of the embedded corpus and the facts it was generated from."""
    if i < 0:
        raise ValueError(f"story index must be >= 0, got {i}")
    rng = random.Random((seed * 1_000_003 + i) ^ _SEED_MIX)
    s = draw_scene(rng)
    arc = ARCS[rng.randrange(len(ARCS))]
    middle = arc(rng, s)
    cut = rng.randrange(2, len(middle) - 1)
    paragraphs = [_opening(rng, s) + middle[:cut], middle[cut:], _closing(rng, s)]
    text = "\n\n".join(" ".join(p) for p in paragraphs)
    return StoryRecord(i, s, arc.__name__.removeprefix("_arc_"), text)


def story(i: int, seed: int = 0) -> str:
    """The `i`-th story of the embedded corpus: a few short paragraphs of plain English."""
    return story_record(i, seed).text


def stories(start: int = 0, stop: int = CORPUS_SIZE, seed: int = 0) -> Iterator[str]:
    """Stories `start` up to `stop` (exclusive), in order."""
    for i in range(start, stop):
        yield story(i, seed)
