"""`marin://tinystories-qa`: questions about the embedded stories whose answers the story generator knows.

Story `i` of `marin://tinystories-synth` is generated from a scene (a hero, a friend, a place, an object,
two feelings) and an arc (`marin.data.corpus.story_record`). Each question here is asked only when its
answer is in the story's text and unambiguous there:

- `who`:     "Who is this story about?"                       -> "It is about Lily." (the hero)
- `friend`:  "Who helped look for the lost thing?" (per arc)  -> "It was Tom." (the friend)
- `where`:   "Where does the story happen?"                    -> "In the park." (not for trips, which go elsewhere)
- `object`:  "What got lost?" (per arc)                        -> "The kite."
- `feeling`: "How did the main character feel when it was gone?" -> "She felt sad." (the feeling the arc names)

No question names a character, place or object, so in a conversation of several questions none
gives away the answer to another. A reply is a short sentence, so the fact in it is tokenized as in
the stories (after a space).

Each item also carries a plausible wrong reply, for preference pairs: the other character for `who`,
a name of the same kind not in the story for `friend`, another place or object not in the story, the
opposite feeling. The splits are by story, so no story is in both: `train` is stories 0-44,999,
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
from marin.data.corpus.scene import Character, cap

SOURCE_NAME = "marin://tinystories-qa"
SPLITS = {"train": (0, 45_000), "validation": (45_000, 50_000)}
"""Story index ranges [start, stop) of each split."""

_QA_SEED = 0x0A_5EED


@dataclass(frozen=True)
class QaItem:
    """One question about story `story`: the reply that answers it and a plausible wrong one, and the
    facts they state (`fact` is in the story's text; `wrong_fact` is not, or is the other character
    or feeling)."""

    story: int
    kind: str
    question: str
    answer: str
    wrong: str
    fact: str
    wrong_fact: str


# No question names a character, place or object: in a conversation of several questions about one
# story, a question that did would hand the model the answer to another (the hero's name in "What did
# Lily lose?" answers "Who is this story about?"), and it would learn to copy from the questions
# instead of reading the story.
_FRIEND_QUESTIONS = {
    "lost_thing": "Who helped look for the lost thing?",
    "new_friend": "Who became a new friend?",
    "fear": "Who helped the main character be brave?",
    "sharing": "Who wanted to play too?",
    "skill": "Who helped the main character learn?",
    "helping": "Who needed help?",
    "trip": "Who went on the trip too?",
    "mistake": "Who did the main character bump into?",
}
_OBJECT_QUESTIONS = {
    "lost_thing": "What got lost?",
    "sharing": "What did the main character not want to share at first?",
    "mistake": "What broke?",
    "trip": "What did they pack besides food?",
}
_FEELING_QUESTIONS = {  # arc -> (question, which feeling answers it)
    "lost_thing": ("How did the main character feel when it was gone?", "sad"),
    "new_friend": ("How did the main character feel with no one to play with?", "sad"),
    "sharing": ("How did the friend feel when the main character would not share?", "sad"),
    "fear": ("How did the main character feel at the end?", "happy"),
    "skill": ("How did the main character feel at the end?", "happy"),
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


# A reply is a short sentence ("It is about Lily.", "In the park.", "She felt sad."), so its fact
# follows a word as it does in the stories: the tokens of " Lily" and " park" are the story's own
# (a bare "park" at the start of a reply would be split into pieces the model has rarely seen).
def _reply(kind: str, fact: str, scene, subject: Character | None = None) -> str:
    if kind == "who":
        return f"It is about {fact}."
    if kind == "friend":
        return f"It was {fact}."
    if kind == "where":
        return f"{cap(dict(lx.PLACES)[fact])} {fact}."
    if kind == "object":
        return f"The {fact}."
    return f"{cap(subject.p.subj)} felt {fact}."


def questions(i: int) -> list[QaItem]:
    """The questions about story `i`, in a fixed order drawn for that story."""
    record = story_record(i)
    s, text, arc = record.scene, record.text, record.arc
    h, f = s.hero, s.friend
    rng = random.Random(i ^ _QA_SEED)
    facts = [("who", "Who is this story about?", h.name, f.name, None)]
    facts.append(("friend", _FRIEND_QUESTIONS[arc], f.name, _other(rng, _names_like(f), text), None))
    if arc != "trip" and s.place in text:
        facts.append(
            ("where", "Where does the story happen?", s.place, _other(rng, dict(lx.PLACES), text), None)
        )
    things = [t for t, _ in lx.OBJECTS]
    if arc in _OBJECT_QUESTIONS:
        facts.append(("object", _OBJECT_QUESTIONS[arc], s.thing, _other(rng, things, text), None))
    elif f" {s.thing}" in text:
        facts.append(("object", "Which object is in the story?", s.thing, _other(rng, things, text), None))
    if arc in _FEELING_QUESTIONS:
        question, which = _FEELING_QUESTIONS[arc]
        right, wrong = (s.sad, s.happy) if which == "sad" else (s.happy, s.sad)
        facts.append(("feeling", question, right, wrong, f if arc == "sharing" else h))
    items = [
        QaItem(i, kind, question, _reply(kind, fact, s, who), _reply(kind, wrong, s, who), fact, wrong)
        for kind, question, fact, wrong, who in facts
    ]
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
