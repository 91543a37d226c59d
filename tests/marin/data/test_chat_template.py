"""Chat rendering: the ids are apply_chat_template's, and the assistant mask comes from the same rendering."""

from __future__ import annotations

import numpy as np
import pytest
from transformers import AutoTokenizer

from marin.data import tinystories_qa
from marin.data.chat_template import (
    END_OF_TURN,
    ChatTemplateError,
    end_of_turn_id,
    prompt_ids,
    render_chat,
)

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

TWO_TURNS = [
    {"role": "system", "content": "Answer in one word."},
    {"role": "user", "content": "Who found the kite?"},
    {"role": "assistant", "content": "Lily"},
    {"role": "user", "content": "Where was it?"},
    {"role": "assistant", "content": "under the big tree"},
]


@pytest.fixture(scope="module")
def tokenizer(chat_tokenizer_dir):
    return AutoTokenizer.from_pretrained(chat_tokenizer_dir)


@pytest.fixture(scope="module")
def chatml_tokenizer(chat_tokenizer_dir):
    """The same BPE with a tokenizer's own (ChatML) template and its special tokens, as Qwen's has."""
    tok = AutoTokenizer.from_pretrained(chat_tokenizer_dir)
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.chat_template = CHATML
    return tok


def test_rendering_gives_exactly_the_ids_of_apply_chat_template(tokenizer, chatml_tokenizer):
    conversations = [TWO_TURNS, tinystories_qa.conversation(7), tinystories_qa.conversation(45_001)]
    for tok in (tokenizer, chatml_tokenizer):
        for messages in conversations:
            expected = tok.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]
            assert render_chat(tok, messages).ids.tolist() == list(expected)


def test_assistant_mask_equals_hugging_faces_generation_mask(tokenizer):
    for messages in (TWO_TURNS, tinystories_qa.conversation(3)):
        reference = tokenizer.apply_chat_template(
            messages, return_dict=True, return_assistant_tokens_mask=True
        )
        rendered = render_chat(tokenizer, messages)
        assert rendered.assistant.astype(int).tolist() == list(reference["assistant_masks"])


def test_the_mask_covers_each_reply_and_its_end_of_turn_and_nothing_else(tokenizer, chatml_tokenizer):
    # a reply's span is what its turn adds to the rendering: ChatML's newline after <|im_end|> too
    for tok, end, after in ((tokenizer, END_OF_TURN, ""), (chatml_tokenizer, "<|im_end|>", "\n")):
        rendered = render_chat(tok, TWO_TURNS)
        masked = rendered.ids[rendered.assistant]
        assert tok.decode(masked) == f"Lily{end}{after}under the big tree{end}{after}"
        assert tok.convert_ids_to_tokens(int(end_of_turn_id(tok))) == end


def test_changing_user_turns_changes_no_assistant_token(tokenizer):
    other = [dict(m) for m in TWO_TURNS]
    other[1]["content"] = "Tell me, please: who was it that found the lost red kite in the park?"
    other[3]["content"] = "And where?"
    a, b = render_chat(tokenizer, TWO_TURNS), render_chat(tokenizer, other)
    assert len(a.ids) != len(b.ids)
    assert a.ids[a.assistant].tolist() == b.ids[b.assistant].tolist()


def test_the_prompt_ends_with_the_assistant_header(tokenizer):
    prompt = prompt_ids(tokenizer, TWO_TURNS[:2])
    full = render_chat(tokenizer, TWO_TURNS[:3])
    first_reply = int(np.argmax(full.assistant))
    assert prompt == full.ids[:first_reply].tolist()


def test_a_template_whose_turns_change_with_what_follows_is_an_error(chat_tokenizer_dir):
    tok = AutoTokenizer.from_pretrained(chat_tokenizer_dir)
    # writes the number of messages first: a prefix of the conversation renders differently
    tok.chat_template = "{{ messages | length }}{% for m in messages %}|{{ m['content'] }}{% endfor %}"
    with pytest.raises(ChatTemplateError, match="turn 2 .assistant. .* not a prefix"):
        render_chat(tok, TWO_TURNS)


def test_a_trained_chat_tokenizer_round_trips_its_template(tmp_path, chat_tokenizer_dir):
    tok = AutoTokenizer.from_pretrained(chat_tokenizer_dir)
    tok.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path)
    assert again.chat_template == tok.chat_template
    assert again.convert_ids_to_tokens([3, 4, 5]) == ["<|start_header_id|>", "<|end_header_id|>", END_OF_TURN]
