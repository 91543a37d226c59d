"""The chat formats: conversations and preference pairs from JSONL and Parquet, bad records one line each."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from marin.data.chat import ChatData, ChatDataError
from marin.data.file_documents import BadRecordError, ShardStats

GOOD = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]}
NO_ASSISTANT = {"messages": [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hi"}]}
BAD_ROLE = {"messages": [{"role": "user", "content": "Hi"}, {"role": "bot", "content": "Hello!"}]}


def _jsonl(path, records) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def _one_line_error(data: ChatData, read) -> str:
    with pytest.raises(BadRecordError) as caught:
        list(read(data, ShardStats()))
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_conversations_come_from_jsonl_and_parquet_in_order(tmp_path):
    jsonl = _jsonl(tmp_path / "a.jsonl", [GOOD, {"messages": GOOD["messages"] * 2}])
    pq.write_table(pa.Table.from_pylist([GOOD]), tmp_path / "b.parquet")
    data = ChatData(paths=(jsonl, str(tmp_path / "b.parquet")))
    found = list(data.conversations(ShardStats()))
    assert [len(c) for c in found] == [2, 4, 2]
    assert found[0] == GOOD["messages"]
    assert list(ChatData(paths=(jsonl,), sample_count=1).conversations(ShardStats())) == [GOOD["messages"]]


def test_a_conversation_without_an_assistant_turn_is_one_line_naming_file_and_line(tmp_path):
    data = ChatData(paths=(_jsonl(tmp_path / "c.jsonl", [GOOD, NO_ASSISTANT]),))
    message = _one_line_error(data, ChatData.conversations)
    assert "c.jsonl:2" in message and "no assistant turn" in message


def test_an_unknown_role_is_one_line_naming_the_message_and_the_roles(tmp_path):
    data = ChatData(paths=(_jsonl(tmp_path / "r.jsonl", [BAD_ROLE]),))
    message = _one_line_error(data, ChatData.conversations)
    assert "r.jsonl:1" in message
    assert "messages[1] has role 'bot'" in message and "system, user, assistant" in message


def test_bad_records_skip_counts_and_keeps_the_rest(tmp_path):
    data = ChatData(
        paths=(_jsonl(tmp_path / "s.jsonl", [GOOD, NO_ASSISTANT, BAD_ROLE, {"text": "x"}, GOOD]),),
        bad_records="skip",
    )
    stats = ShardStats()
    assert len(list(data.conversations(stats))) == 2
    assert stats.bad_records == 3
    assert any("no 'messages' field" in e for e in stats.bad_examples)


def test_preference_pairs_take_strings_or_messages_and_refuse_equal_answers(tmp_path):
    pairs = [
        {"prompt": "Who is it about?", "chosen": "Lily", "rejected": "Tom"},
        {
            "prompt": [{"role": "user", "content": "Where?"}],
            "chosen": [{"role": "assistant", "content": "the park"}],
            "rejected": [{"role": "assistant", "content": "the zoo"}],
        },
    ]
    data = ChatData(paths=(_jsonl(tmp_path / "p.jsonl", pairs),))
    found = list(data.pairs(ShardStats()))
    assert found[0].prompt == [{"role": "user", "content": "Who is it about?"}]
    assert found[0].chosen == [{"role": "assistant", "content": "Lily"}]
    assert found[1].rejected == [{"role": "assistant", "content": "the zoo"}]
    same = ChatData(paths=(_jsonl(tmp_path / "same.jsonl", [pairs[0], {**pairs[0], "rejected": "Lily"}]),))
    message = _one_line_error(same, ChatData.pairs)
    assert "same.jsonl:2" in message and "chosen and rejected are the same answer" in message


def test_the_embedded_qa_source_has_both_forms_and_declaration_errors_are_chat_data_errors():
    data = ChatData(source="marin://tinystories-qa", split="validation", sample_count=3)
    assert len(list(data.conversations(ShardStats()))) == 3
    assert len(list(data.pairs(ShardStats()))) == 3
    with pytest.raises(ChatDataError, match="splits train, validation, not 'test'"):
        ChatData(source="marin://tinystories-qa", split="test")
    with pytest.raises(ChatDataError, match="unknown source"):
        ChatData(source="marin://nope")
    with pytest.raises(ChatDataError, match="exactly one of"):
        ChatData()
