"""Exact match on chat prompts with known answers: does the model's greedy reply equal the answer?

Each item is a conversation ending with a user turn, and the answer. The prompt is the conversation
rendered by the tokenizer's chat template with the generation prompt (`marin.data.chat_template`);
the reply is generated greedily (by our own layers' batched KV-cached generator when the model
is one we trained, else Hugging Face's `generate`, with its KV cache) until the template's
end-of-turn token or EOS, at most `max_new_tokens` tokens. Reply and answer are compared
after SQuAD's normalization (lower case; punctuation and the articles a, an, the removed; whitespace
collapsed), so "The park." matches "the park". The score is an accuracy with its Wilson interval
(`marin.evaluation.stats.accuracy`), overall and per kind of question; every item's reply and
correctness are written out, so two models scored on the same items can be compared item by item
(`stats.paired_difference`).

Items come from `marin://tinystories-qa` (its held-out `validation` stories by default) or from
JSONL/Parquet files of `{"messages": [...], "answer": "..."}` (an optional `"kind"` groups them).
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from marin.data import tinystories_qa
from marin.data.chat import BadChatRecord, check_messages
from marin.data.file_documents import ShardStats, report_bad
from marin.evaluation.errors import EvalDataError
from marin.evaluation.score_cache import ScoreCache, item_key
from marin.evaluation.stats import accuracy

ITEMS_FILE = "exact_match.jsonl"
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


@dataclass(frozen=True)
class ExactMatchTask:
    """Which items an exact-match evaluation scores, and how long a reply may be.

    `source="marin://tinystories-qa"` (with `split`) or `paths=` (JSONL/Parquet files of
    `{"messages", "answer"}`); the first `items` of them (None: all).
    """

    source: str | None = tinystories_qa.SOURCE_NAME
    paths: tuple[str, ...] | None = None
    split: str = "validation"
    items: int | None = 400
    max_new_tokens: int = 12

    def __post_init__(self) -> None:
        if self.paths is not None:
            object.__setattr__(self, "paths", tuple(self.paths))
            object.__setattr__(self, "source", None)
        if self.source is not None and self.source != tinystories_qa.SOURCE_NAME:
            raise EvalDataError(
                f"exact match: unknown source {self.source!r}; use {tinystories_qa.SOURCE_NAME!r} or paths="
            )
        if self.source is not None and self.split not in tinystories_qa.SPLITS:
            raise EvalDataError(
                f"exact match: {self.source} has splits {', '.join(tinystories_qa.SPLITS)}, not {self.split!r}"
            )
        for name in ("items", "max_new_tokens"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise EvalDataError(f"exact match: {name} must be a positive int, got {value!r}")

    def name(self) -> str:
        """How results name the task."""
        return "tinystories_qa" if self.source is not None else "exact_match"

    def load_items(self) -> list[dict]:
        """`{"messages", "answer", "kind"}` per item, in order (run time: reads the files)."""
        if self.source is not None:
            return tinystories_qa.eval_items(self.split, self.items)
        from storage import list_files
        from zephyr.io import Position, infer_format, read_file

        out: list[dict] = []
        stats = ShardStats()
        for path in list_files(list(self.paths)):
            pos = Position()
            for record in read_file(path, infer_format(path), "fail", pos, stats):
                try:
                    out.append(_item(record))
                except BadChatRecord as bad:
                    report_bad("fail", stats, path, pos.line, str(bad))
                if self.items is not None and len(out) == self.items:
                    return out
        return out


def _item(record: Any) -> dict:
    if not isinstance(record, dict) or not isinstance(record.get("answer"), str):
        raise BadChatRecord("an exact-match item needs 'messages' and a string 'answer'")
    messages = check_messages(record.get("messages"))
    if messages[-1]["role"] == "assistant":
        raise BadChatRecord("the messages end with an assistant turn; the reply to score comes after them")
    return {"messages": messages, "answer": record["answer"], "kind": str(record.get("kind", "all"))}


def _digest(item: dict) -> str:
    """The first 16 hex digits of the digest of an item's conversation and answer: two evaluations of
    the same items pair them by it."""
    import orjson

    from marin.execution.manifest import bytes_digest

    return bytes_digest(orjson.dumps([item["messages"], item["answer"]]))[:16]


def normalize_answer(text: str) -> str:
    """SQuAD's answer normalization: lower case, no punctuation, no articles, single spaces."""
    text = _ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION))
    return " ".join(text.split())


def greedy_replies(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[list[int]],
    max_new_tokens: int,
    max_length: int,
    *,
    cache: ScoreCache | None = None,
    model_id: str = "",
    generate: Any = None,
    batch_size: int = 8,
) -> list[list[int]]:
    """The greedy continuation of each prompt, stopped at the end-of-turn token or EOS (not included).

    A prompt is cut to its last `max_length - max_new_tokens` tokens. `generate` (our own layers'
    batched generator, `(prompts, max_new_tokens, eos_id) -> new ids`) decodes `batch_size` prompts
    at once; without it each prompt is continued on its own by Hugging Face's `model.generate` (greedy,
    with its KV cache), so no padding enters the computation. Replies go through `cache` (see
    `score_cache`), keyed by the model, the prompt, the length and the stop tokens.
    """
    import torch

    from marin.data.chat_template import end_of_turn_id

    stops = [i for i in (end_of_turn_id(tokenizer), tokenizer.eos_token_id) if i is not None]
    device = next(model.parameters()).device
    keep = max(1, max_length - max_new_tokens)
    windows = [list(ids)[-keep:] for ids in prompts]

    def cut(new: list[int]) -> list[int]:
        return new[: next((n for n, token in enumerate(new) if token in stops), len(new))]

    def compute(indices: list[int]) -> list[list[int]]:
        if generate is not None:
            return [cut(new) for new in generate([windows[i] for i in indices], max_new_tokens, stops[-1])]
        replies = []
        with torch.inference_mode():
            for i in indices:
                window = torch.tensor([windows[i]], device=device)
                out = model.generate(
                    window,
                    attention_mask=torch.ones_like(window),
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    eos_token_id=stops,
                    pad_token_id=stops[-1],
                )
                replies.append(cut(out[0, window.shape[1] :].tolist()))
        return replies

    cache = cache if cache is not None else ScoreCache(None)
    settings = {"max_new_tokens": max_new_tokens, "stops": stops, "generator": "marin" if generate else "hf"}
    keys = [item_key(model_id, settings, "greedy_reply", w) for w in windows]
    order = sorted(range(len(windows)), key=lambda i: (-len(windows[i]), keys[i]))
    return cache.score(keys, order, batch_size, compute)


def score_exact_match(
    model: Any,
    tokenizer: Any,
    task: ExactMatchTask,
    max_length: int,
    *,
    cache: ScoreCache | None = None,
    model_id: str = "",
    generate: Any = None,
    batch_size: int = 8,
) -> tuple[dict, list[dict]]:
    """(results, per-item records): exact match overall and per kind, each a metric with its interval."""
    from marin.data.chat_template import prompt_ids, require_template

    require_template(tokenizer, "the evaluated model")
    items = task.load_items()
    if not items:
        raise EvalDataError(f"exact match: the task {task.name()!r} has no items")
    prompts = [prompt_ids(tokenizer, item["messages"]) for item in items]
    replies = greedy_replies(
        model,
        tokenizer,
        prompts,
        task.max_new_tokens,
        max_length,
        cache=cache,
        model_id=model_id,
        generate=generate,
        batch_size=batch_size,
    )
    records = []
    for i, (item, reply) in enumerate(zip(items, replies, strict=True)):
        text = tokenizer.decode(reply, skip_special_tokens=True)
        correct = normalize_answer(text) == normalize_answer(item["answer"])
        records.append(
            {
                "item": i,
                "id": f"{i}:{_digest(item)}",
                "kind": item["kind"],
                "answer": item["answer"],
                "reply": text,
                "correct": correct,
            }
        )
    by_kind: dict[str, list[float]] = {}
    for r in records:
        by_kind.setdefault(r["kind"], []).append(float(r["correct"]))
    results = {
        "task": task.name(),
        "exact_match": accuracy([float(r["correct"]) for r in records]).to_json(),
        "by_kind": {kind: accuracy(values).to_json() for kind, values in sorted(by_kind.items())},
        "items_path": ITEMS_FILE,
    }
    return results, records
