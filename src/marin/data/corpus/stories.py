"""The story generator: story `i` is a pure function of `i`, built from one of several story arcs.

Each story picks a cast (a hero, a friend), a place, an object, the weather and a time from
`lexicon`, then one arc (a lost thing found, a new friend, a fear faced, a skill learned, ...),
each sentence slot choosing among a few phrasings. The seeded `random.Random(i)` makes it stable
across runs, processes and platforms.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from marin.data.corpus import lexicon as lx

SOURCE_NAME = "marin://tinystories-synth"
"""The source name `tokenized(source=...)` accepts for this corpus."""

CORPUS_SIZE = 50_000
"""How many stories the embedded source holds (story(i) is defined for any i >= 0)."""

_SEED_MIX = 0x5EED_57_0E1


@dataclass(frozen=True)
class _Character:
    name: str
    kind: str
    p: lx.Pronouns

    @property
    def intro(self) -> str:
        article = "an" if self.kind[0] in "aeiou" else "a"
        return f"{article} {self.kind} named {self.name}"


@dataclass(frozen=True)
class _Scene:
    hero: _Character
    friend: _Character
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


def _character(rng: random.Random, avoid: str = "") -> _Character:
    while True:
        roll = rng.random()
        if roll < 0.35:
            c = _Character(rng.choice(lx.GIRL_NAMES), "girl", lx.SHE)
        elif roll < 0.7:
            c = _Character(rng.choice(lx.BOY_NAMES), "boy", lx.HE)
        else:
            c = _Character(
                rng.choice(lx.ANIMAL_NAMES), rng.choice(lx.ANIMAL_KINDS), rng.choice((lx.SHE, lx.HE))
            )
        if c.name != avoid:
            return c


def _scene(rng: random.Random) -> _Scene:
    hero = _character(rng)
    friend = _character(rng, avoid=hero.name)
    place, prep = rng.choice(lx.PLACES)
    thing, adjectives = rng.choice(lx.OBJECTS)
    return _Scene(
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


def _cap(s: str) -> str:
    return s[0].upper() + s[1:]


def _opening(rng: random.Random, s: _Scene) -> list[str]:
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
            f"{_cap(h.p.subj)} had a {s.thing_adj} {s.thing} that {h.p.subj} loved very much.",
            f"{h.name} liked to {s.activity} {s.prep} {s.place}.",
            f"The sky was {s.weather} and the air smelled of {s.food}.",
        )
    )
    return [first, second]


def _closing(rng: random.Random, s: _Scene) -> list[str]:
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


def _arc_lost_thing(rng: random.Random, s: _Scene) -> list[str]:
    h, f = s.hero, s.friend
    return [
        rng.choice(
            (
                f"{h.name} took {h.p.poss} {s.thing_adj} {s.thing} to {s.place}.",
                f"{h.name} was playing with {h.p.poss} {s.thing} {s.prep} {s.place}.",
            )
        ),
        rng.choice(
            (
                f"But when {h.p.subj} looked down, the {s.thing} was gone!",
                f"Suddenly, {h.p.subj} could not find the {s.thing} anywhere.",
                f"After a while, {h.p.subj} saw that the {s.thing} was missing.",
            )
        ),
        f"{h.name} felt {s.sad}.",
        rng.choice(
            (
                f"{_cap(h.p.subj)} looked under the bench and behind the bushes.",
                f"{_cap(h.p.subj)} looked high and low, but {h.p.subj} did not see it.",
                f'{_cap(h.p.subj)} called out, "Where are you, {s.thing}?"',
            )
        ),
        f"Then {f.intro} came by. {f.name} was very {s.trait}.",
        f'"{rng.choice(lx.HELPERS_SAY)}," said {f.name}. "I will help you look."',
        rng.choice(
            (
                f'Together they searched {s.prep} {s.place} until {f.name} shouted, "I found it!"',
                f"They followed a trail of little marks, and there was the {s.thing}, "
                f"hiding {rng.choice(('under a leaf', 'in the grass', 'behind a rock', 'near the water'))}.",
                f"At last, {h.name} saw something {s.thing_adj}. It was the {s.thing}!",
            )
        ),
        f"{h.name} hugged {f.name} and said thank you.",
    ]


def _arc_new_friend(rng: random.Random, s: _Scene) -> list[str]:
    h, f = s.hero, s.friend
    return [
        f"{h.name} wanted to {s.activity}, but {h.p.subj} had no one to play with.",
        f"{_cap(h.p.subj)} felt {s.sad} and sat down {s.prep} {s.place}.",
        rng.choice(
            (
                f"Then {h.p.subj} heard {rng.choice(lx.SOUNDS)}.",
                f"Just then, {f.intro} walked up and waved.",
                f"Nearby, {f.intro} was sitting alone too.",
            )
        ),
        f'"Hello," said {h.name}. "My name is {h.name}. Do you want to {s.activity}?"',
        rng.choice(
            (
                f'{f.name} smiled. "Yes, please!"',
                f'{f.name} was {s.trait}, but {f.p.subj} nodded and said, "I would like that."',
                f'"I love to {s.activity}!" said {f.name}.',
            )
        ),
        rng.choice(
            (
                "They played until the sun went down.",
                "They laughed and ran and had so much fun.",
                f"{h.name} shared {h.p.poss} {s.thing} with {f.name}, and they took turns.",
            )
        ),
    ]


def _arc_fear(rng: random.Random, s: _Scene) -> list[str]:
    h, f = s.hero, s.friend
    scary = rng.choice(
        ("the dark", "the deep water", "the big dog", "the thunder", "the tall slide", "the loud wind")
    )
    return [
        f"{h.name} was afraid of {scary}.",
        rng.choice(
            (
                f"Every time {h.p.subj} thought about it, {h.p.poss} tummy felt funny.",
                f"{_cap(h.p.subj)} did not want to go near {s.place}.",
                f"When {h.p.subj} heard {rng.choice(lx.SOUNDS)}, {h.p.subj} hid behind a chair.",
            )
        ),
        f"{f.name} the {f.kind} saw that {h.name} was {s.sad}.",
        f'"What is wrong?" asked {f.name}.',
        f'"I am scared of {scary}," said {h.name}.',
        rng.choice(
            (
                f'"I was scared too, once," said {f.name}. "Let us go together, one step at a time."',
                f'"{rng.choice(lx.HELPERS_SAY)}," said {f.name}, and held {h.p.poss} hand.',
                f"{f.name} gave {h.name} {h.p.poss} {s.thing_adj} {s.thing} to hold for courage.",
            )
        ),
        rng.choice(
            (
                f"{h.name} took a deep breath and tried.",
                f"Slowly, {h.name} felt a little braver.",
                f"{h.name} counted to three and went forward.",
            )
        ),
        f"It was not so bad after all! {h.name} felt {s.happy}.",
    ]


def _arc_sharing(rng: random.Random, s: _Scene) -> list[str]:
    h, f = s.hero, s.friend
    return [
        f"{h.name} had a {s.thing_adj} {s.thing}.",
        f'{f.name} wanted to play with it too, but {h.name} said, "No, it is mine!"',
        f"{f.name} felt {s.sad} and walked away.",
        rng.choice(
            (
                f"Soon {h.name} was playing alone, and it was not much fun.",
                f"{h.name} looked at the {s.thing}. It did not feel special anymore.",
                f"{h.name} thought about how {f.name} must feel.",
            )
        ),
        rng.choice(
            (
                f'{_cap(h.p.subj)} ran after {f.name}. "I am sorry. Do you want to play with my {s.thing}?"',
                f'{_cap(h.p.subj)} found {f.name} {s.prep} {s.place} and said, "Let us share."',
            )
        ),
        f"{f.name} smiled, and they played with the {s.thing} together.",
        rng.choice(
            (
                "Sharing made the game twice as fun.",
                f"Later, {f.name} shared {f.p.poss} {s.food} with {h.name}.",
            )
        ),
    ]


def _arc_skill(rng: random.Random, s: _Scene) -> list[str]:
    h, f = s.hero, s.friend
    skill, done = rng.choice(lx.SKILLS)
    tries = rng.choice(("two", "three", "four", "five", "many"))
    return [
        f"{h.name} wanted to learn to {skill}.",
        f"The first time {h.p.subj} tried, it did not work.",
        rng.choice(
            (
                f"{_cap(h.p.subj)} felt {s.sad} and wanted to give up.",
                f"{_cap(h.p.subj)} frowned and stamped {h.p.poss} foot.",
                f'"This is too hard," {h.p.subj} said.',
            )
        ),
        rng.choice(
            (
                f'{f.name} said, "{rng.choice(lx.HELPERS_SAY)}. Watch me."',
                f"{f.name} the {f.kind} showed {h.p.obj} how, slowly and carefully.",
                f'{f.name} cheered, "You can do it, {h.name}!"',
            )
        ),
        f"{h.name} tried again {tries} times.",
        f"At last, {h.p.subj} {done}!",
        f'"I did it!" shouted {h.name}. {_cap(h.p.subj)} felt so {s.happy}.',
    ]


def _arc_helping(rng: random.Random, s: _Scene) -> list[str]:
    h, f = s.hero, s.friend
    trouble = rng.choice(
        (
            "was stuck in a tree",
            f"had dropped {f.p.poss} {s.thing} in the water",
            f"could not carry all the {s.food}",
            f"had hurt {f.p.poss} paw" if f.kind not in lx.CHILD_KINDS else f"had hurt {f.p.poss} knee",
            "was lost and could not find the way home",
        )
    )
    return [
        f"{h.name} was walking {s.prep} {s.place} when {h.p.subj} heard someone cry.",
        f"It was {f.intro}. {f.name} {trouble}.",
        rng.choice(
            (
                f'"{rng.choice(lx.HELPERS_SAY)}," said {h.name}.',
                f"{h.name} did not know what to do at first, but {h.p.subj} wanted to help.",
            )
        ),
        rng.choice(
            (
                f"{_cap(h.p.subj)} thought hard and had a good idea.",
                f"{_cap(h.p.subj)} found a long stick and a rope.",
                f"{_cap(h.p.subj)} ran to get help from {h.p.poss} mom.",
            )
        ),
        rng.choice(
            (
                "It took a long time, but together they fixed the problem.",
                "Soon everything was all right again.",
                f"With a little work, {f.name} was safe and happy.",
            )
        ),
        f'"Thank you," said {f.name}. "You are very {s.trait} and kind."',
        f"{h.name} felt warm inside.",
    ]


def _arc_trip(rng: random.Random, s: _Scene) -> list[str]:
    h, f = s.hero, s.friend
    place2, prep2 = rng.choice(lx.PLACES)
    seen = rng.sample(
        (
            "a big red bird",
            "a tiny snail",
            "a rainbow",
            "a boat with a white sail",
            "a field of flowers",
            "a sleepy cow",
            "a tall tower",
            "a little waterfall",
            "three baby ducks",
            "a funny cloud",
        ),
        k=2,
    )
    return [
        f"{h.name} and {f.name} went on a trip to {place2}.",
        f"They packed {s.food} and a {s.thing_adj} {s.thing}.",
        f"On the way, they saw {seen[0]} and {seen[1]}.",
        rng.choice(
            (
                f"When they got to {place2}, the weather turned {s.weather}.",
                f"{prep2.capitalize()} {place2}, they decided to {s.activity}.",
                f'{f.name} said, "Look! This is the best place ever!"',
            )
        ),
        rng.choice(
            (
                "They stayed until their legs were tired.",
                f"They told stories and ate their {s.food}.",
                f"{h.name} used the {s.thing} to play a new game.",
            )
        ),
        f'On the way home, {h.name} said, "Let us come back tomorrow."',
    ]


def _arc_mistake(rng: random.Random, s: _Scene) -> list[str]:
    h, f = s.hero, s.friend
    return [
        f"{h.name} was running {s.prep} {s.place} too fast.",
        f"{_cap(h.p.subj)} bumped into {f.name}, and {f.name}'s {s.thing} broke.",
        rng.choice(
            (
                f"{f.name} began to cry.",
                f"{f.name} looked {s.sad} and did not say a word.",
            )
        ),
        rng.choice(
            (
                f"{h.name} wanted to run away, but {h.p.subj} stayed.",
                f"{h.name} felt bad. {_cap(h.p.subj)} knew it was {h.p.poss} fault.",
            )
        ),
        f'"I am sorry," said {h.name}. "I will help you fix it."',
        rng.choice(
            (
                f"They used some glue and tape, and soon the {s.thing} looked almost new.",
                f"They could not fix it, so {h.name} made {f.name} a new {s.thing} from paper.",
                f"{h.name} gave {f.name} {h.p.poss} own {s.thing_adj} {s.thing}.",
            )
        ),
        f"{f.name} smiled again.",
    ]


_ARCS: tuple[Callable[[random.Random, _Scene], list[str]], ...] = (
    _arc_lost_thing,
    _arc_new_friend,
    _arc_fear,
    _arc_sharing,
    _arc_skill,
    _arc_helping,
    _arc_trip,
    _arc_mistake,
)


def story(i: int, seed: int = 0) -> str:
    """The `i`-th story of the embedded corpus: a few short paragraphs of plain English."""
    if i < 0:
        raise ValueError(f"story index must be >= 0, got {i}")
    rng = random.Random((seed * 1_000_003 + i) ^ _SEED_MIX)
    s = _scene(rng)
    arc = _ARCS[rng.randrange(len(_ARCS))]
    middle = arc(rng, s)
    cut = rng.randrange(2, len(middle) - 1)
    paragraphs = [_opening(rng, s) + middle[:cut], middle[cut:], _closing(rng, s)]
    return "\n\n".join(" ".join(p) for p in paragraphs)


def stories(start: int = 0, stop: int = CORPUS_SIZE, seed: int = 0) -> Iterator[str]:
    """Stories `start` up to `stop` (exclusive), in order."""
    for i in range(start, stop):
        yield story(i, seed)
