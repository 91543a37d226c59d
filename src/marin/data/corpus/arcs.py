"""The story arcs: the middle of a story (a lost thing found, a new friend, a fear faced, ...).

Each arc writes the sentences of its plot about a `Scene`, each sentence slot choosing among a few
phrasings with the story's seeded `random.Random`. `ARCS` is indexed by that generator, so its order
(and the order of every choice inside an arc) is part of the corpus: changing it changes every story.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from marin.data.corpus import lexicon as lx
from marin.data.corpus.scene import Scene, cap


def _arc_lost_thing(rng: random.Random, s: Scene) -> list[str]:
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
                f"{cap(h.p.subj)} looked under the bench and behind the bushes.",
                f"{cap(h.p.subj)} looked high and low, but {h.p.subj} did not see it.",
                f'{cap(h.p.subj)} called out, "Where are you, {s.thing}?"',
            )
        ),
        f"Then {f.intro} came by. {f.name} was very {s.trait}.",
        f'"{rng.choice(lx.HELPERS_SAY)}," said {f.name}. "I will help you look."',
        rng.choice(
            (
                f'Together they searched {s.prep} {s.place} until {f.name} shouted, "I found it!"',
                f"They followed a trail of little marks, and there was the {s.thing}, "
                f"hiding {rng.choice(lx.HIDING_SPOTS)}.",
                f"At last, {h.name} saw something {s.thing_adj}. It was the {s.thing}!",
            )
        ),
        f"{h.name} hugged {f.name} and said thank you.",
    ]


def _arc_new_friend(rng: random.Random, s: Scene) -> list[str]:
    h, f = s.hero, s.friend
    return [
        f"{h.name} wanted to {s.activity}, but {h.p.subj} had no one to play with.",
        f"{cap(h.p.subj)} felt {s.sad} and sat down {s.prep} {s.place}.",
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


def _arc_fear(rng: random.Random, s: Scene) -> list[str]:
    h, f = s.hero, s.friend
    scary = rng.choice(lx.SCARY_THINGS)
    return [
        f"{h.name} was afraid of {scary}.",
        rng.choice(
            (
                f"Every time {h.p.subj} thought about it, {h.p.poss} tummy felt funny.",
                f"{cap(h.p.subj)} did not want to go near {s.place}.",
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


def _arc_sharing(rng: random.Random, s: Scene) -> list[str]:
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
                f'{cap(h.p.subj)} ran after {f.name}. "I am sorry. Do you want to play with my {s.thing}?"',
                f'{cap(h.p.subj)} found {f.name} {s.prep} {s.place} and said, "Let us share."',
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


def _arc_skill(rng: random.Random, s: Scene) -> list[str]:
    h, f = s.hero, s.friend
    skill, done = rng.choice(lx.SKILLS)
    tries = rng.choice(lx.TRY_COUNTS)
    return [
        f"{h.name} wanted to learn to {skill}.",
        f"The first time {h.p.subj} tried, it did not work.",
        rng.choice(
            (
                f"{cap(h.p.subj)} felt {s.sad} and wanted to give up.",
                f"{cap(h.p.subj)} frowned and stamped {h.p.poss} foot.",
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
        f'"I did it!" shouted {h.name}. {cap(h.p.subj)} felt so {s.happy}.',
    ]


def _arc_helping(rng: random.Random, s: Scene) -> list[str]:
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
                f"{cap(h.p.subj)} thought hard and had a good idea.",
                f"{cap(h.p.subj)} found a long stick and a rope.",
                f"{cap(h.p.subj)} ran to get help from {h.p.poss} mom.",
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


def _arc_trip(rng: random.Random, s: Scene) -> list[str]:
    h, f = s.hero, s.friend
    place2, prep2 = rng.choice(lx.PLACES)
    seen = rng.sample(lx.TRIP_SIGHTS, k=2)
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


def _arc_mistake(rng: random.Random, s: Scene) -> list[str]:
    h, f = s.hero, s.friend
    return [
        f"{h.name} was running {s.prep} {s.place} too fast.",
        f"{cap(h.p.subj)} bumped into {f.name}, and {f.name}'s {s.thing} broke.",
        rng.choice(
            (
                f"{f.name} began to cry.",
                f"{f.name} looked {s.sad} and did not say a word.",
            )
        ),
        rng.choice(
            (
                f"{h.name} wanted to run away, but {h.p.subj} stayed.",
                f"{h.name} felt bad. {cap(h.p.subj)} knew it was {h.p.poss} fault.",
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


ARCS: tuple[Callable[[random.Random, Scene], list[str]], ...] = (
    _arc_lost_thing,
    _arc_new_friend,
    _arc_fear,
    _arc_sharing,
    _arc_skill,
    _arc_helping,
    _arc_trip,
    _arc_mistake,
)
