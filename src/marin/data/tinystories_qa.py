"""`marin://tinystories-qa`: questions about the embedded stories whose answers the story generator knows.

Story `i` of `marin://tinystories-synth` is generated from a scene (a hero, a friend, a place, an object,
two feelings) and an arc (`marin.data.corpus.story_record`). Each question here is asked only when its
answer is in the story's text and unambiguous there:

- `who`:     "Who is this story about?"                     -> the hero's name
- `friend`:  "Who helped Lily look for the kite?" (per arc) -> the friend's name
- `where`:   "Where does the story happen?"                 -> the place (not for trips, which go elsewhere)
- `object`:  "What did Lily lose?" (per arc)                -> the object
- `feeling`: "How did Lily feel when the kite was gone?"    -> the feeling the arc names

Each item also carries a plausible wrong answer, for preference pairs: the other character's name for
`who`, a name of the same kind not in the story for `friend`, another place or object not in the story,
the opposite feeling. The splits are by story, so no story is in both: `train` is stories 0-44,999,
`validation` (held out) 45,000-49,999, the tail of the corpus that pretraining on a sample of it rarely
reaches. Everything is a pure function of the story index (the wrong answers and the order of the
questions come from a `random.Random` seeded by it).

Three forms of the same items:
- `conversations(split)`: one chat per story, its questions as turns (the first user turn holds the
  story): supervised fine-tuning data;
- `preference_pairs(split)`: one pair per question, the story and question as the prompt, the right
  answer chosen and the wrong one rejected: DPO data;
- `eval_items(split)`: one prompt per question with its answer, scored by exact match.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from marin.data.corpus import lexicon as lx
from marin.data.corpus import story_record
from marin.data.corpus.scene import Character

SOURCE_NAME = "marin://tinystories-qa"
SPLITS = {"train": (0, 45_000), "validation": (45_000, 50_000)}
"""Story index ranges [start, stop) of each split."""

_QA_SEED = 0x0A_5EED


@dataclass(frozen=True)
class QaItem:
    """One question about story `story`, its answer and a plausible wrong answer."""

    story: int
    kind: str
    question: str
    answer: str
    wrong: str


_FRIEND_QUESTIONS = {
    "lost_thing": "Who helped {h} look for the {thing}?",
    "new_friend": "Who did {h} play with?",
    "fear": "Who helped {h} feel brave?",
    "sharing": "Who wanted to play with {h}'s {thing}?",
    "skill": "Who helped {h} learn?",
    "helping": "Who did {h} help?",
    "trip": "Who went on the trip with {h}?",
    "mistake": "Who did {h} bump into?",
}
_OBJECT_QUESTIONS = {
    "lost_thing": "What did {h} lose?",
    "sharing": "What did {h} not want to share at first?",
    "mistake": "What broke?",
    "trip": "What did {h} and {f} pack besides the {food}?",
}
_FEELING_QUESTIONS = {  # arc -> (question, which feeling answers it)
    "lost_thing": ("How did {h} feel when the {thing} was gone?", "sad"),
    "new_friend": ("How did {h} feel with no one to play with?", "sad"),
    "sharing": ("How did {f} feel when {h} would not share?", "sad"),
    "fear": ("How did {h} feel at the end?", "happy"),
    "skill": ("How did {h} feel at the end?", "happy"),
}


def _names_like(c: Character) -> tuple[str, ...]:
    if c.kind == "girl":
        return lx.GIRL_NAMES
    if c.kind == "boy":
        return lx.BOY_NAMES
    return lx.ANIMAL_NAMES


def _other(rng: random.Random, options, text: str) -> str:
    """An option that does not occur in the story's text (so it is surely wrong)."""
    candidates = [o for o in options if o not in text]
    return rng.choice(candidates)


def questions(i: int) -> list[QaItem]:
    """The questions about story `i`, in a fixed order drawn for that story."""
    record = story_record(i)
    s, text, arc = record.scene, record.text, record.arc
    h, f = s.hero, s.friend
    rng = random.Random(i ^ _QA_SEED)
    fill = {"h": h.name, "f": f.name, "thing": s.thing, "food": s.food}
    items = [QaItem(i, "who", "Who is this story about?", h.name, f.name)]
    items.append(
        QaItem(i, "friend", _FRIEND_QUESTIONS[arc].format(**fill), f.name, _other(rng, _names_like(f), text))
    )
    if arc != "trip" and s.place in text:
        wrong = _other(rng, [p for p, _ in lx.PLACES], text)
        items.append(QaItem(i, "where", "Where does the story happen?", s.place, wrong))
    things = [t for t, _ in lx.OBJECTS]
    if arc in _OBJECT_QUESTIONS:
        question = _OBJECT_QUESTIONS[arc].format(**fill)
        items.append(QaItem(i, "object", question, s.thing, _other(rng, things, text)))
    elif f" {s.thing}" in text:
        items.append(QaItem(i, "object", "Which object is in the story?", s.thing, _other(rng, things, text)))
    if arc in _FEELING_QUESTIONS:
        question, which = _FEELING_QUESTIONS[arc]
        right, wrong = (s.sad, s.happy) if which == "sad" else (s.happy, s.sad)
        items.append(QaItem(i, "feeling", question.format(**fill), right, wrong))
    rng.shuffle(items)
    return items


def prompt_text(story: str, question: str) -> str:
    """The first user turn: the story, a blank line, the question."""
    return f"{story}\n\n{question}"


def _story_range(split: str) -> range:
    start, stop = SPLITS[split]
    return range(start, stop)


def conversation(i: int) -> list[dict[str, str]]:
    """Story `i`'s questions as one chat: the story with the first question, then one question a turn."""
    text = story_record(i).text
    messages: list[dict[str, str]] = []
    for n, item in enumerate(questions(i)):
        content = prompt_text(text, item.question) if n == 0 else item.question
        messages.append({"role": "user", "content": content})
        messages.append({"role": "assistant", "content": item.answer})
    return messages


def conversations(split: str) -> Iterator[list[dict[str, str]]]:
    """One conversation per story of `split`, in story order."""
    return (conversation(i) for i in _story_range(split))


def preference_pairs(split: str) -> Iterator[dict]:
    """One pair per question of each story of `split`: `{"story", "kind", "prompt", "chosen", "rejected"}`."""
    for i in _story_range(split):
        text = story_record(i).text
        for item in questions(i):
            yield {
                "story": i,
                "kind": item.kind,
                "prompt": [{"role": "user", "content": prompt_text(text, item.question)}],
                "chosen": [{"role": "assistant", "content": item.answer}],
                "rejected": [{"role": "assistant", "content": item.wrong}],
            }


def eval_items(split: str, limit: int | None = None) -> list[dict]:
    """`{"story", "kind", "messages", "answer"}` per question of the first stories of `split`, until `limit` items."""
    out: list[dict] = []
    for i in _story_range(split):
        text = story_record(i).text
        for item in questions(i):
            if limit is not None and len(out) >= limit:
                return out
            out.append(
                {
                    "story": i,
                    "kind": item.kind,
                    "messages": [{"role": "user", "content": prompt_text(text, item.question)}],
                    "answer": item.answer,
                }
            )
    return out
