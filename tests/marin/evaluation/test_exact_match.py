"""Exact match: SQuAD's normalization, greedy replies as a plain argmax loop gives them, one-line bad items."""

from __future__ import annotations

import re
import string

import orjson
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from marin.data.chat_template import end_of_turn_id, prompt_ids
from marin.evaluation.exact_match import ExactMatchTask, normalize_answer, score_exact_match
from marin.evaluation.stats import accuracy
from zephyr.errors import BadRecordError


def _squad_normalize(s: str) -> str:
    """The SQuAD v1.1 evaluation script's normalize_answer, written out independently."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def test_normalization_is_squads():
    for text in ("The park.", "  in THE   old barn! ", "An apple, a day", "It's Lily's kite", "theme park"):
        assert normalize_answer(text) == _squad_normalize(text)
    assert normalize_answer("The park.") == normalize_answer("park")


def _argmax_reply(model, ids: list[int], stops: set[int], max_new: int) -> list[int]:
    out: list[int] = []
    with torch.no_grad():
        for _ in range(max_new):
            token = int(model(torch.tensor([ids + out])).logits[0, -1].argmax())
            if token in stops:
                break
            out.append(token)
    return out


def test_replies_are_the_greedy_continuations_and_the_score_is_their_accuracy(chat_model_dir, tmp_path):
    model = AutoModelForCausalLM.from_pretrained(chat_model_dir, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(chat_model_dir)
    questions = ["Who is this story about?", "Where does the story happen?", "What got lost?"]
    stops = {end_of_turn_id(tokenizer), tokenizer.eos_token_id}
    expected = [
        tokenizer.decode(
            _argmax_reply(model, prompt_ids(tokenizer, [{"role": "user", "content": q}]), stops, 5),
            skip_special_tokens=True,
        )
        for q in questions
    ]
    # the first item's answer is the model's own reply (so it is right), the others' are not
    answers = [expected[0].upper() + ".", "nowhere at all", "no such thing"]
    path = tmp_path / "items.jsonl"
    path.write_bytes(
        b"".join(
            orjson.dumps({"messages": [{"role": "user", "content": q}], "answer": a, "kind": "k"}) + b"\n"
            for q, a in zip(questions, answers, strict=True)
        )
    )
    results, records = score_exact_match(
        model, tokenizer, ExactMatchTask(paths=(str(path),), max_new_tokens=5), max_length=512
    )
    assert [r["reply"] for r in records] == expected
    correct = [
        float(normalize_answer(e) == normalize_answer(a)) for e, a in zip(expected, answers, strict=True)
    ]
    assert correct[0] == 1.0 and [r["correct"] for r in records] == [bool(c) for c in correct]
    assert results["exact_match"] == accuracy(correct).to_json()
    assert results["task"] == "exact_match" and set(results["by_kind"]) == {"k"}


def test_an_item_ending_with_the_assistant_is_one_line_naming_file_and_line(chat_model_dir, tmp_path):
    path = tmp_path / "bad.jsonl"
    turns = [{"role": "user", "content": "Who?"}, {"role": "assistant", "content": "Lily"}]
    path.write_bytes(
        orjson.dumps({"messages": turns[:1], "answer": "Lily"})
        + b"\n"
        + orjson.dumps({"messages": turns, "answer": "Lily"})
        + b"\n"
    )
    with pytest.raises(BadRecordError) as caught:
        ExactMatchTask(paths=(str(path),)).load_items()
    message = str(caught.value)
    assert "bad.jsonl:2" in message and "end with an assistant turn" in message and "\n" not in message
