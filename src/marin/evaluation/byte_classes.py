"""What each byte of a text is (a URL, code, a number, whitespace, non-ASCII, punctuation, other text),
and each token's loss spread over the bytes it covers: the byte alignment that lets models with
different tokenizers be compared on the same text.

A token covers the bytes from the end of the token before it to its own end (its character offsets,
as the tokenizer reports them, turned into UTF-8 byte offsets), so the tokens of a document
partition its bytes: a leading space belongs to the word token after it, as byte-level BPE and
SentencePiece both encode it. A token that covers no byte of its own (the second token of one
character split in two) hands its loss to the next token that does (the last one's to the one
before). Each token's loss is spread evenly over its bytes, so the losses per byte add up to the
document's loss exactly, whatever the tokenizer.

Classes, each byte in exactly one, the first that applies: `url` (`http(s)://...`, `www....`),
`code` (a line that reads as code, or text between backticks), `number` (digits, with their inner
`.`/`,`), `whitespace`, `non_ascii` (bytes of characters beyond ASCII), `punctuation`, `text`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

CLASSES = ("url", "code", "number", "whitespace", "non_ascii", "punctuation", "text")
VERSION = 1  # bump when the classes or their rules change: it is part of every cached bucket sum
_URL = re.compile(r"(?:https?://|www\.)[^\s<>\"'()\[\]]+")
_BACKTICKS = re.compile(r"`[^`\n]+`|```.*?```", re.DOTALL)
_CODE_LINE = re.compile(
    r"^[ \t]*(?:(?:def|class|import|from|return|if|for|while|elif|else|try|except|with|function|var|let|const"
    r"|public|private|static|void|int|#include|#define)\b.*|.*[;{}][ \t]*|[A-Za-z_][\w.\[\]]*[ \t]*(?:[-+*/]?=|==|=>)"
    r"[^=].*)$",
    re.MULTILINE,
)
_NUMBER = re.compile(r"\d(?:[\d.,]*\d)?")
_WHITESPACE = re.compile(r"\s+")
_PUNCT = re.compile(r"[^\w\s]")


def byte_classes(text: str) -> np.ndarray:
    """The class (an index into `CLASSES`) of every UTF-8 byte of `text`."""
    data = text.encode("utf-8")
    starts = _char_byte_starts(data)
    out = np.full(len(data), CLASSES.index("text"), dtype=np.uint8)
    assigned = np.zeros(len(data), dtype=bool)

    def mark(name: str, spans) -> None:
        index = CLASSES.index(name)
        for a, b in spans:
            lo, hi = starts[a], starts[b]
            free = ~assigned[lo:hi]
            out[lo:hi][free] = index
            assigned[lo:hi] = True

    mark("url", (m.span() for m in _URL.finditer(text)))
    mark("code", (m.span() for m in _BACKTICKS.finditer(text)))
    mark("code", (m.span() for m in _CODE_LINE.finditer(text) if m.end() > m.start()))
    mark("number", (m.span() for m in _NUMBER.finditer(text)))
    mark("whitespace", (m.span() for m in _WHITESPACE.finditer(text)))
    non_ascii = (np.frombuffer(data, dtype=np.uint8) >= 0x80) & ~assigned
    out[non_ascii] = CLASSES.index("non_ascii")
    assigned |= non_ascii
    mark("punctuation", (m.span() for m in _PUNCT.finditer(text)))
    return out


def class_bytes(classes: np.ndarray) -> np.ndarray:
    """Bytes per class: a `len(CLASSES)` int array."""
    return np.bincount(classes, minlength=len(CLASSES)).astype(np.int64)


def _char_byte_starts(data: bytes) -> np.ndarray:
    """The byte offset of each character of the decoded text, then the length: index by char offset."""
    raw = np.frombuffer(data, dtype=np.uint8)
    return np.append(np.flatnonzero((raw & 0xC0) != 0x80), len(raw)).astype(np.int64)


def token_byte_spans(text: str, char_offsets: Sequence[tuple[int, int]]) -> np.ndarray:
    """Each token's byte span `[start, end)`: from the previous token's end to its own (see the module
    docstring); a (tokens, 2) int array whose spans partition the text's bytes, empty ones included."""
    starts = _char_byte_starts(text.encode("utf-8"))
    total = int(starts[-1])
    ends = np.array([starts[min(e, len(starts) - 1)] for _, e in char_offsets], dtype=np.int64)
    if len(ends):
        ends = np.maximum.accumulate(ends)
        ends[-1] = total
    begins = np.concatenate([[0], ends[:-1]]) if len(ends) else ends
    return np.stack([begins, ends], axis=1) if len(ends) else np.zeros((0, 2), dtype=np.int64)


def _owners(spans: np.ndarray) -> np.ndarray:
    """For each token, the token whose bytes carry its loss: itself when it covers bytes, else the
    next one that does (the last such token, for trailing empty ones); -1 for a text of no bytes."""
    covering = np.flatnonzero(spans[:, 1] > spans[:, 0])
    if not len(covering):
        return np.full(len(spans), -1, dtype=np.int64)
    at = np.searchsorted(covering, np.arange(len(spans)))
    return covering[np.minimum(at, len(covering) - 1)]


def token_class_fractions(spans: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """(tokens, len(CLASSES)): the share of each token's loss that falls on each class of bytes.

    Rows sum to 1 (0 only for a text without bytes), so `losses @ fractions` splits a sum of token
    losses by class without losing any of it.
    """
    owner = _owners(spans)
    if not len(spans) or owner[0] < 0:
        return np.zeros((len(spans), len(CLASSES)))
    counts = np.zeros((len(classes) + 1, len(CLASSES)))
    counts[1:] = np.cumsum(np.eye(len(CLASSES))[classes], axis=0)
    a, b = spans[owner, 0], spans[owner, 1]
    return (counts[b] - counts[a]) / (b - a)[:, None]


def byte_losses(spans: np.ndarray, token_losses: np.ndarray, num_bytes: int) -> np.ndarray:
    """The loss on each byte: every token's loss spread evenly over the bytes that carry it."""
    owner = _owners(spans)
    if not len(spans) or owner[0] < 0:
        return np.zeros(num_bytes)
    carried = np.zeros(len(spans))
    np.add.at(carried, owner, np.asarray(token_losses, dtype=np.float64))
    covering = np.flatnonzero(spans[:, 1] > spans[:, 0])
    lengths = spans[covering, 1] - spans[covering, 0]
    return np.repeat(carried[covering] / lengths, lengths)
