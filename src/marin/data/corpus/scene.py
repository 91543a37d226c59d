"""The cast and setting of one story: a hero, a friend, a place, an object, the weather, a time.

`draw_scene(rng)` draws them from `lexicon`; the arcs (`arcs.py`) and the story frame (`stories.py`)
write sentences about them. Every draw goes through the one seeded `random.Random` of the story, in
a fixed order, so the stories stay byte-for-byte stable.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from marin.data.corpus import lexicon as lx


@dataclass(frozen=True)
class Character:
    """A hero or friend: a name, what they are (girl, boy, an animal kind) and their pronouns."""

    name: str
    kind: str
    p: lx.Pronouns

    @property
    def intro(self) -> str:
        article = "an" if self.kind[0] in "aeiou" else "a"
        return f"{article} {self.kind} named {self.name}"


@dataclass(frozen=True)
class Scene:
    """Everything one story is about, drawn once before its first sentence."""

    hero: Character
    friend: Character
    place: str
    prep: str
    thing: str
    thing_adj: str
    weather: str
    time: str
    happy: str
    sad: str
    trait: str
    activity: str
    food: str


def _draw_character(rng: random.Random, avoid: str = "") -> Character:
    while True:
        roll = rng.random()
        if roll < 0.35:
            c = Character(rng.choice(lx.GIRL_NAMES), "girl", lx.SHE)
        elif roll < 0.7:
            c = Character(rng.choice(lx.BOY_NAMES), "boy", lx.HE)
        else:
            c = Character(
                rng.choice(lx.ANIMAL_NAMES), rng.choice(lx.ANIMAL_KINDS), rng.choice((lx.SHE, lx.HE))
            )
        if c.name != avoid:
            return c


def draw_scene(rng: random.Random) -> Scene:
    """The cast and setting of a story, drawn from `rng` in a fixed order."""
    hero = _draw_character(rng)
    friend = _draw_character(rng, avoid=hero.name)
    place, prep = rng.choice(lx.PLACES)
    thing, adjectives = rng.choice(lx.OBJECTS)
    return Scene(
        hero=hero,
        friend=friend,
        place=place,
        prep=prep,
        thing=thing,
        thing_adj=rng.choice(adjectives),
        weather=rng.choice(lx.WEATHER),
        time=rng.choice(lx.TIMES),
        happy=rng.choice(lx.HAPPY_FEELINGS),
        sad=rng.choice(lx.SAD_FEELINGS),
        trait=rng.choice(lx.FRIEND_TRAITS),
        activity=rng.choice(lx.ACTIVITIES),
        food=rng.choice(lx.FOODS),
    )


def cap(s: str) -> str:
    """`s` with its first letter upper-cased (str.capitalize would lower the rest)."""
    return s[0].upper() + s[1:]
