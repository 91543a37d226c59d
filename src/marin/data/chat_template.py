"""Chat templates, and turning a conversation into token ids with the mask of the assistant's tokens.

A conversation is rendered by the tokenizer's own chat template through Hugging Face's
`apply_chat_template`, so the ids we train on are exactly the ids `transformers` gives the exported
model at inference. The assistant mask comes from the same rendering: for each assistant turn `i`, the
text of the turns before it with the generation prompt (`add_generation_prompt=True`) and the text
through it are both prefixes of the whole conversation's text, and the characters between them are
that turn's reply (its end-of-turn marker included). A token is the assistant's when it starts inside
such a span (from the fast tokenizer's offsets). This works for any template whose rendering of a
prefix of the conversation is a prefix of the rendering of the whole; one that is not is an error
naming the turn.

`train_tokenizer(chat_template="llama3")` gives a tokenizer `LLAMA3_CHAT_TEMPLATE` and its special
tokens: Llama 3's turn format (headers, `<|eot_id|>` ending each turn), with `{% generation %}` marks
around the assistant's replies so that `apply_chat_template(return_assistant_tokens_mask=True)` (and
TRL's assistant-only loss) work on it too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from marin.execution.errors import MarinError

START_HEADER, END_HEADER, END_OF_TURN = "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"
LLAMA3_SPECIAL_TOKENS = (START_HEADER, END_HEADER, END_OF_TURN)

LLAMA3_CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '" + START_HEADER + "' + message['role'] + '" + END_HEADER + "\\n\\n' -}}"
    "{%- if message['role'] == 'assistant' -%}"
    "{%- generation -%}{{- message['content'] + '" + END_OF_TURN + "' -}}{%- endgeneration -%}"
    "{%- else -%}{{- message['content'] + '" + END_OF_TURN + "' -}}{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '"
    + START_HEADER
    + "assistant"
    + END_HEADER
    + "\\n\\n' -}}{%- endif -%}"
)
"""Llama 3's chat format without a BOS (our documents have none), assistant replies marked for HF's mask."""

BUILTIN_TEMPLATES = {"llama3": (LLAMA3_CHAT_TEMPLATE, LLAMA3_SPECIAL_TOKENS)}
"""Template names `train_tokenizer(chat_template=...)` accepts: the Jinja text and the special tokens it uses."""


class ChatTemplateError(MarinError):
    """A tokenizer has no chat template, or its template cannot give an assistant mask."""


@dataclass(frozen=True)
class RenderedChat:
    """A conversation as token ids and, per id, whether it belongs to an assistant reply (a target)."""

    ids: np.ndarray  # int64
    assistant: np.ndarray  # bool, same length


def require_template(tokenizer: Any, where: str) -> None:
    """Raise ChatTemplateError unless `tokenizer` has a chat template (`where` names its source)."""
    if not getattr(tokenizer, "chat_template", None):
        raise ChatTemplateError(
            f"the tokenizer of {where} has no chat template; train it with "
            "train_tokenizer(..., chat_template='llama3'), or use a tokenizer that has one"
        )


def _text(tokenizer: Any, messages: list[dict], generation_prompt: bool = False) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)


def assistant_spans(
    tokenizer: Any, messages: list[dict], score_from: int = 0
) -> tuple[str, list[tuple[int, int]]]:
    """The conversation's text and the [start, stop) character span of each assistant reply in it
    (of the replies from message `score_from` on)."""
    text = _text(tokenizer, messages)
    spans = []
    for i, message in enumerate(messages):
        if message["role"] != "assistant" or i < score_from:
            continue
        before = _text(tokenizer, messages[:i], generation_prompt=True) if i else _opening(tokenizer)
        through = _text(tokenizer, messages[: i + 1])
        if not (text.startswith(through) and through.startswith(before)):
            raise ChatTemplateError(
                f"the chat template renders the conversation up to turn {i} (assistant) as text that is not a "
                "prefix of the whole conversation's rendering, so its assistant tokens cannot be found; use a "
                "template whose turns render the same whatever follows them"
            )
        spans.append((len(before), len(through)))
    return text, spans


def _opening(tokenizer: Any) -> str:
    """What the template writes before a reply that opens the conversation ("" if it needs a message first)."""
    try:
        return _text(tokenizer, [], generation_prompt=True)
    except Exception:  # a template that reads messages[0]
        return ""


def render_chat(tokenizer: Any, messages: list[dict], score_from: int = 0) -> RenderedChat:
    """The ids `tokenizer.apply_chat_template(messages)` gives, and which of them are the assistant's
    (only replies from message `score_from` on: a preference pair scores its answer, not its prompt)."""
    text, spans = assistant_spans(tokenizer, messages, score_from)
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = np.asarray(encoded["input_ids"], dtype=np.int64)
    starts = np.asarray([start for start, _ in encoded["offset_mapping"]], dtype=np.int64)
    assistant = np.zeros(len(ids), dtype=bool)
    for a, b in spans:
        assistant |= (starts >= a) & (starts < b)
    return RenderedChat(ids, assistant)


def prompt_ids(tokenizer: Any, messages: list[dict]) -> list[int]:
    """The ids of `messages` followed by the generation prompt: what the model continues to answer."""
    text = _text(tokenizer, messages, generation_prompt=True)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def end_of_turn_id(tokenizer: Any) -> int | None:
    """The special token that ends an assistant reply in this template (`<|eot_id|>`, `<|im_end|>`, ...).

    Found by rendering a one-word reply: the first special token of the reply's span after its word.
    None when the reply ends with no special token (generation then stops at EOS only).
    """
    probe = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]
    rendered = render_chat(tokenizer, probe)
    special = set(getattr(tokenizer, "all_special_ids", ()))
    special |= {i for i, t in getattr(tokenizer, "added_tokens_decoder", {}).items() if t.special}
    reply = rendered.ids[rendered.assistant]
    return next((int(i) for i in reply if int(i) in special), None)


def generation_config(tokenizer: Any) -> dict:
    """A `generation_config.json` under which generation stops at the end of the assistant's turn
    (the template's end-of-turn token) as well as at EOS, so a `transformers` pipeline chats."""
    stops = [i for i in (end_of_turn_id(tokenizer), tokenizer.eos_token_id) if i is not None]
    config: dict = {"eos_token_id": stops if len(stops) > 1 else (stops[0] if stops else None)}
    if tokenizer.bos_token_id is not None:
        config["bos_token_id"] = tokenizer.bos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if pad is not None:
        config["pad_token_id"] = pad
    return config
