"""Chat data: conversations and preference pairs, read from files or the embedded QA task.

A conversation is OpenAI-style, one JSON object per line (or a Parquet row):

    {"messages": [{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}]}

Roles are `system`, `user` and `assistant`; content is a string; at least one turn is the assistant's
(supervised fine-tuning learns only those). A preference pair holds a prompt and two answers, the
preferred one first (TRL's conversational format; a string stands for one message):

    {"prompt": [{"role": "user", "content": "..."}], "chosen": [{"role": "assistant", "content": "A"}],
     "rejected": [{"role": "assistant", "content": "B"}]}

Files are read by zephyr's readers (`zephyr.io.read_file`), so JSONL (.gz, .zst) and Parquet work and a
malformed line is reported like any other: a `BadRecordError` naming file:line and what is wrong under
`bad_records="fail"`, skipped and counted under `"skip"`. `marin://tinystories-qa` (`tinystories_qa`)
is read without files.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from marin.data.file_documents import BAD_RECORD_POLICIES, ShardStats, report_bad
from marin.execution.errors import MarinError
from marin.execution.keyed import NOT_KEY
from zephyr.io import Position, infer_format, read_file

ROLES = ("system", "user", "assistant")
"""The roles a message may have."""

Message = dict[str, str]


class ChatDataError(MarinError):
    """Chat data is declared wrongly (no source, an unknown embedded source, a bad policy)."""


class BadChatRecord(ValueError):
    """One record is not a valid conversation or pair; the message says what is wrong with it."""


@dataclass(frozen=True)
class PreferencePair:
    """A prompt and two answers to it, `chosen` preferred over `rejected` (each a list of messages)."""

    prompt: list[Message]
    chosen: list[Message]
    rejected: list[Message]


def check_messages(messages: Any, where: str = "messages") -> list[Message]:
    """`messages` as a list of {"role", "content"} dicts, or BadChatRecord saying what is wrong."""
    if not isinstance(messages, list) or not messages:
        raise BadChatRecord(f"{where} must be a non-empty list of {{'role', 'content'}} objects")
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise BadChatRecord(
                f"{where}[{i}] is a {type(message).__name__}, not a {{'role', 'content'}} object"
            )
        role, content = message.get("role"), message.get("content")
        if role not in ROLES:
            raise BadChatRecord(f"{where}[{i}] has role {role!r}; a role is one of {', '.join(ROLES)}")
        if not isinstance(content, str):
            raise BadChatRecord(
                f"{where}[{i}] ({role}) has content of type {type(content).__name__}; content must be a string"
            )
        out.append({"role": role, "content": content})
    return out


def check_conversation(messages: Any) -> list[Message]:
    """A conversation for supervised fine-tuning: valid messages, at least one of them the assistant's."""
    checked = check_messages(messages)
    if not any(m["role"] == "assistant" for m in checked):
        raise BadChatRecord(
            "the conversation has no assistant turn, so there is nothing to learn from it; "
            "add the assistant's reply or drop the conversation"
        )
    return checked


def _as_messages(value: Any, role: str, where: str) -> list[Message]:
    if isinstance(value, str):
        return [{"role": role, "content": value}]
    return check_messages(value, where)


def check_pair(record: Any) -> PreferencePair:
    """A preference pair from a record with `prompt`, `chosen` and `rejected`, or BadChatRecord."""
    if not isinstance(record, dict) or not all(k in record for k in ("prompt", "chosen", "rejected")):
        found = sorted(record)[:8] if isinstance(record, dict) else type(record).__name__
        raise BadChatRecord(f"a preference pair needs 'prompt', 'chosen' and 'rejected' (found {found})")
    prompt = _as_messages(record["prompt"], "user", "prompt")
    if prompt[-1]["role"] == "assistant":
        raise BadChatRecord(
            "the prompt ends with an assistant turn; the answers in chosen/rejected follow it"
        )
    chosen = _as_messages(record["chosen"], "assistant", "chosen")
    rejected = _as_messages(record["rejected"], "assistant", "rejected")
    for name, answer in (("chosen", chosen), ("rejected", rejected)):
        if not any(m["role"] == "assistant" for m in answer):
            raise BadChatRecord(f"{name} has no assistant turn; it must hold the answer to the prompt")
    if chosen == rejected:
        raise BadChatRecord(
            "chosen and rejected are the same answer, so the pair prefers nothing; "
            "give a different rejected answer or drop the pair"
        )
    return PreferencePair(prompt, chosen, rejected)


def _checked_records(path: str, key: str | None, check, bad_records: str, stats: ShardStats) -> Iterator[Any]:
    pos = Position()
    for record in read_file(path, infer_format(path), bad_records, pos, stats):
        try:
            if key is None:
                yield check(record)
                continue
            if not isinstance(record, dict) or key not in record:
                found = sorted(record)[:8] if isinstance(record, dict) else type(record).__name__
                raise BadChatRecord(
                    f"no {key!r} field (found {found}); set messages_key= to the field that holds the messages"
                )
            yield check(record[key])
        except BadChatRecord as bad:
            report_bad(bad_records, stats, path, pos.line, str(bad))


def read_conversations(
    path: str, bad_records: str, stats: ShardStats, messages_key: str = "messages"
) -> Iterator[list[Message]]:
    """The conversations of one JSONL or Parquet file, in file order."""
    return _checked_records(path, messages_key, check_conversation, bad_records, stats)


def read_pairs(path: str, bad_records: str, stats: ShardStats) -> Iterator[PreferencePair]:
    """The preference pairs of one JSONL or Parquet file, in file order."""
    return _checked_records(path, None, check_pair, bad_records, stats)


@dataclass(frozen=True)
class ChatData:
    """Which conversations or pairs a step reads: `source="marin://tinystories-qa"` or `paths=` (files, globs).

    `split` picks the embedded source's split ("train", or "validation": held-out stories); files have
    none. `sample_count` takes the first N records in order (None: all). `bad_records` is "fail" (an
    error naming file:line) or "skip" (skip and count). `messages_key` is the field holding a
    conversation's messages.
    """

    source: str | None = None
    paths: tuple[str, ...] | None = None
    split: str = "train"
    sample_count: int | None = None
    bad_records: str = "fail"
    messages_key: str = "messages"
    name: str = field(default="", metadata=NOT_KEY)  # how messages name it (the step's own name)

    def __post_init__(self) -> None:
        from marin.data import tinystories_qa

        if (self.source is None) == (self.paths is None):
            raise ChatDataError(
                f"chat data: give exactly one of source={tinystories_qa.SOURCE_NAME!r} or paths= (JSONL/Parquet files)"
            )
        if self.paths is not None:
            if isinstance(self.paths, str):
                raise ChatDataError(
                    f"chat data: paths= takes a list of files or globs, got the string {self.paths!r}"
                )
            object.__setattr__(self, "paths", tuple(self.paths))
            for p in self.paths:
                infer_format(p)  # an unknown extension fails at declaration
        elif self.source != tinystories_qa.SOURCE_NAME:
            raise ChatDataError(
                f"chat data: unknown source {self.source!r}; the embedded one is {tinystories_qa.SOURCE_NAME!r}, "
                "and files are given as paths="
            )
        elif self.split not in tinystories_qa.SPLITS:
            raise ChatDataError(
                f"chat data: {self.source} has splits {', '.join(tinystories_qa.SPLITS)}, not {self.split!r}"
            )
        if self.bad_records not in BAD_RECORD_POLICIES:
            raise ChatDataError(
                f"chat data: bad_records={self.bad_records!r}; choose one of {BAD_RECORD_POLICIES}"
            )
        n = self.sample_count
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise ChatDataError(f"chat data: sample_count must be a positive int or None, got {n!r}")

    def describe(self) -> dict:
        """What the key records: the source or files, split, count, policy and messages field."""
        where = (
            {"paths": list(self.paths)}
            if self.paths is not None
            else {"source": self.source, "split": self.split}
        )
        return where | {
            "sample_count": self.sample_count,
            "bad_records": self.bad_records,
            "messages_key": self.messages_key,
        }

    def inputs(self) -> tuple[str, ...]:
        """The files the data is read from, as a step's declared inputs (the embedded source: none)."""
        return self.paths or ()

    def conversations(self, stats: ShardStats) -> Iterator[list[Message]]:
        """The conversations, in order (at most `sample_count`)."""
        from marin.data import tinystories_qa

        if self.source is not None:
            found = tinystories_qa.conversations(self.split)
        else:
            found = (
                c
                for path in self._files()
                for c in read_conversations(path, self.bad_records, stats, self.messages_key)
            )
        return islice(found, self.sample_count)

    def pairs(self, stats: ShardStats) -> Iterator[PreferencePair]:
        """The preference pairs, in order (at most `sample_count`)."""
        from marin.data import tinystories_qa

        if self.source is not None:
            found = (check_pair(r) for r in tinystories_qa.preference_pairs(self.split))
        else:
            found = (p for path in self._files() for p in read_pairs(path, self.bad_records, stats))
        return islice(found, self.sample_count)

    def _files(self) -> list[str]:
        from storage import list_files

        return list_files(list(self.paths))
