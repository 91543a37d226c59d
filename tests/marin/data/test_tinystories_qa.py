"""marin://tinystories-qa: every answer is in its story, wrong answers are wrong, the splits share no story."""

from __future__ import annotations

import re
from collections import Counter

from marin.data import tinystories_qa as qa
from marin.data.corpus import story, story_record


def test_every_answer_is_in_its_story_and_every_wrong_answer_differs():
    kinds = Counter()
    for i in range(300):
        text = story(i)
        for item in qa.questions(i):
            kinds[item.kind] += 1
            assert item.fact in text and item.fact in item.answer, (i, item)
            assert item.wrong != item.answer and item.wrong_fact in item.wrong
            if item.kind in ("friend", "where", "object"):
                assert item.wrong_fact not in text, (i, item)  # surely wrong: not in the story at all
    assert set(kinds) == {"who", "friend", "where", "object", "feeling"}
    assert kinds["who"] == kinds["friend"] == 300


def test_answers_are_the_facts_the_generator_drew():
    for i in range(100):
        scene = story_record(i).scene
        by_kind = {item.kind: item for item in qa.questions(i)}
        assert by_kind["who"].answer == f"It is about {scene.hero.name}."
        assert by_kind["friend"].answer == f"It was {scene.friend.name}."
        if "where" in by_kind:
            assert by_kind["where"].answer == f"{scene.prep.capitalize()} {scene.place}."
        if "object" in by_kind:
            assert by_kind["object"].answer == f"The {scene.thing}."
        if "feeling" in by_kind:
            assert by_kind["feeling"].answer.endswith((f" felt {scene.happy}.", f" felt {scene.sad}."))
            assert {by_kind["feeling"].fact, by_kind["feeling"].wrong_fact} == {scene.happy, scene.sad}


def test_the_three_forms_agree_and_the_splits_are_disjoint_by_story():
    train_stop = qa.SPLITS["train"][1]
    assert qa.SPLITS["validation"][0] == train_stop
    chat = qa.conversation(5)
    items = qa.questions(5)
    assert chat[0]["content"] == qa.prompt_text(story(5), items[0].question)
    assert [m["content"] for m in chat[1::2]] == [item.answer for item in items]
    held_out = qa.eval_items("validation", limit=20)
    assert len(held_out) == 20 and all(item["story"] >= train_stop for item in held_out)
    pairs = [p for p, _ in zip(qa.preference_pairs("validation"), range(20), strict=False)]
    assert [p["chosen"][0]["content"] for p in pairs] == [item["answer"] for item in held_out]
    assert [p["prompt"] for p in pairs] == [item["messages"] for item in held_out]


def test_the_items_are_the_same_on_every_call():
    assert qa.questions(123) == qa.questions(123)
    assert qa.eval_items("validation", limit=7) == qa.eval_items("validation", limit=7)


def test_no_question_gives_away_an_answer_to_another_question_of_its_story():
    for i in range(300):
        items = qa.questions(i)
        for question in (item.question for item in items):
            assert not any(re.search(rf"\b{re.escape(item.fact)}\b", question) for item in items), (
                i,
                question,
            )
