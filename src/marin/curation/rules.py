"""Quality rules: Gopher quality, Gopher repetition, C4 and FineWeb, each with explicit thresholds.

A rule is a frozen config whose `apply(text)` returns `(text, None)` to keep the document (C4 may
return it with lines removed) or `(None, reason)` to drop it, `reason` naming the check that failed
(e.g. "gopher_quality.stop_words"). The defaults are the published values (see docs/curation.md):
Gopher: Rae et al. 2021, "Scaling Language Models", appendix A; C4: Raffel et al. 2020, section 2.2;
FineWeb: Penedo et al. 2024, section 3.3 — as implemented in datatrove.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Protocol

WORD_RE = re.compile(r"\w+(?:['’-]\w+)*|[^\w\s]+")
PUNCTUATION_CHARS = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~’‘“”…–—•·«»"
PUNCTUATION = frozenset(PUNCTUATION_CHARS)
_LETTER = re.compile(r"[^\W\d_]")
STOP_WORDS = frozenset(("the", "be", "to", "of", "and", "that", "have", "with"))
TERMINAL_PUNCTUATION = (".", "!", "?", '"', "'", "”", "’", "…")


def words_of(text: str) -> list[str]:
    """The words and punctuation runs of a text (one tokenizer for every rule)."""
    return WORD_RE.findall(text)


class Rule(Protocol):
    name: str

    def apply(self, text: str) -> tuple[str | None, str | None]: ...


@dataclass(frozen=True)
class GopherQuality:
    """Gopher's document-level heuristics (Rae et al. 2021, table A1)."""

    min_doc_words: int = 50
    max_doc_words: int = 100_000
    min_avg_word_length: float = 3.0
    max_avg_word_length: float = 10.0
    max_symbol_word_ratio: float = 0.1
    max_bullet_lines_ratio: float = 0.9
    max_ellipsis_lines_ratio: float = 0.3
    min_alpha_words_ratio: float = 0.8
    min_stop_words: int = 2
    name: str = "gopher_quality"

    def apply(self, text: str) -> tuple[str | None, str | None]:
        words = words_of(text)
        n = len(words)
        content = [w for w in words if w.strip(PUNCTUATION_CHARS)]
        if len(content) < self.min_doc_words:
            return None, "gopher_quality.min_doc_words"
        if len(content) > self.max_doc_words:
            return None, "gopher_quality.max_doc_words"
        avg = sum(map(len, content)) / len(content)
        if avg < self.min_avg_word_length:
            return None, "gopher_quality.min_avg_word_length"
        if avg > self.max_avg_word_length:
            return None, "gopher_quality.max_avg_word_length"
        if text.count("#") / n > self.max_symbol_word_ratio:
            return None, "gopher_quality.hash_ratio"
        if (text.count("...") + text.count("…")) / n > self.max_symbol_word_ratio:
            return None, "gopher_quality.ellipsis_ratio"
        lines = text.splitlines() or [""]
        if sum(s.lstrip().startswith(("•", "-")) for s in lines) / len(lines) > self.max_bullet_lines_ratio:
            return None, "gopher_quality.bullet_lines"
        if sum(s.rstrip().endswith(("...", "…")) for s in lines) / len(lines) > self.max_ellipsis_lines_ratio:
            return None, "gopher_quality.ellipsis_lines"
        letter = _LETTER.search
        if sum(1 for w in words if letter(w)) / n < self.min_alpha_words_ratio:
            return None, "gopher_quality.alpha_words"
        if (
            len(STOP_WORDS.intersection(words)) < self.min_stop_words
        ):  # distinct stop words, as Gopher counts them
            return None, "gopher_quality.stop_words"
        return text, None


def _duplicates(elements: list[str]) -> tuple[int, int]:
    """How many elements (and their characters) repeat one seen before."""
    seen: set[str] = set()
    dup_elements = dup_chars = 0
    for e in elements:
        if e in seen:
            dup_elements += 1
            dup_chars += len(e)
        else:
            seen.add(e)
    return dup_elements, dup_chars


def _ngrams(words: list[str], n: int) -> list[str]:
    return [" ".join(words[i : i + n]) for i in range(len(words) - n + 1)]


def _top_ngram_chars(words: list[str], n: int) -> int:
    counts = Counter(_ngrams(words, n))
    if not counts:
        return 0
    gram, count = counts.most_common(1)[0]
    return len(gram) * count if count > 1 else 0


def _dup_ngram_chars(words: list[str], n: int) -> int:
    """Characters of words covered by an n-gram that occurred before (each word counted once)."""
    seen: set[tuple[str, ...]] = set()
    covered = [False] * len(words)
    i = 0
    while i <= len(words) - n:
        gram = tuple(words[i : i + n])
        if gram in seen:
            for j in range(i, i + n):
                covered[j] = True
            i += n
        else:
            seen.add(gram)
            i += 1
    return sum(len(w) for w, c in zip(words, covered, strict=False) if c)


@dataclass(frozen=True)
class GopherRepetition:
    """Gopher's repetition heuristics (Rae et al. 2021, table A1): duplicate lines, paragraphs, n-grams."""

    dup_line_frac: float = 0.3
    dup_para_frac: float = 0.3
    dup_line_char_frac: float = 0.2
    dup_para_char_frac: float = 0.2
    top_n_grams: tuple[tuple[int, float], ...] = ((2, 0.2), (3, 0.18), (4, 0.16))
    dup_n_grams: tuple[tuple[int, float], ...] = (
        (5, 0.15),
        (6, 0.14),
        (7, 0.13),
        (8, 0.12),
        (9, 0.11),
        (10, 0.10),
    )
    name: str = "gopher_repetition"

    def apply(self, text: str) -> tuple[str | None, str | None]:
        paragraphs = [p for p in re.split(r"\n{2,}", text.strip()) if p.strip()]
        if paragraphs:
            dup, chars = _duplicates(paragraphs)
            if dup / len(paragraphs) > self.dup_para_frac:
                return None, "gopher_repetition.dup_para_frac"
            if chars / len(text) > self.dup_para_char_frac:
                return None, "gopher_repetition.dup_para_char_frac"
        lines = [s for s in re.split(r"\n+", text) if s.strip()]
        if lines:
            dup, chars = _duplicates(lines)
            if dup / len(lines) > self.dup_line_frac:
                return None, "gopher_repetition.dup_line_frac"
            if chars / len(text) > self.dup_line_char_frac:
                return None, "gopher_repetition.dup_line_char_frac"
        words = [w for w in words_of(text) if w.strip(PUNCTUATION_CHARS)]
        total = sum(map(len, words))
        if not total:
            return text, None
        for n, frac in self.top_n_grams:
            if _top_ngram_chars(words, n) / total > frac:
                return None, f"gopher_repetition.top_{n}_gram"
        for n, frac in self.dup_n_grams:
            if _dup_ngram_chars(words, n) / total > frac:
                return None, f"gopher_repetition.dup_{n}_gram"
        return text, None


POLICY_SUBSTRINGS = (
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "use of cookies",
    "use cookies",
)


@dataclass(frozen=True)
class C4:
    """The C4 heuristics (Raffel et al. 2020, section 2.2): drop bad lines, then judge the document.

    Lines without terminal punctuation, with fewer than `min_words_per_line` words, mentioning
    javascript or a cookie / terms policy are removed; documents with "lorem ipsum", a curly bracket
    or fewer than `min_sentences` sentences left are dropped.
    """

    min_words_per_line: int = 3
    max_word_length: int = 1000
    min_sentences: int = 5
    drop_lorem_ipsum: bool = True
    drop_curly_bracket: bool = True
    name: str = "c4"

    def apply(self, text: str) -> tuple[str | None, str | None]:
        lower = text.lower()
        if self.drop_lorem_ipsum and "lorem ipsum" in lower:
            return None, "c4.lorem_ipsum"
        if self.drop_curly_bracket and "{" in text:
            return None, "c4.curly_bracket"
        kept: list[str] = []
        for line in text.splitlines():
            s = line.strip()
            if not s or not s.endswith(TERMINAL_PUNCTUATION) or s.endswith("..."):
                continue
            words = s.split()
            if len(words) < self.min_words_per_line or max(map(len, words)) > self.max_word_length:
                continue
            low = s.lower()
            if "javascript" in low or any(p in low for p in POLICY_SUBSTRINGS):
                continue
            kept.append(s)
        sentences = sum(len(re.findall(r"[.!?…]+(?:\s|$)", s)) or 1 for s in kept)
        if sentences < self.min_sentences:
            return None, "c4.min_sentences"
        return "\n".join(kept), None


@dataclass(frozen=True)
class FineWeb:
    """FineWeb's custom filters (Penedo et al. 2024, section 3.3)."""

    line_punct_thr: float = 0.12
    short_line_thr: float = 0.67
    short_line_length: int = 30
    char_duplicates_ratio: float = 0.01
    new_line_ratio: float = 0.3
    name: str = "fineweb"

    def apply(self, text: str) -> tuple[str | None, str | None]:
        lines = [s for s in text.split("\n") if s.strip()]
        if not lines:
            return None, "fineweb.empty"
        if sum(s.rstrip().endswith(TERMINAL_PUNCTUATION) for s in lines) / len(lines) <= self.line_punct_thr:
            return None, "fineweb.line_punct_ratio"
        if sum(len(s) <= self.short_line_length for s in lines) / len(lines) >= self.short_line_thr:
            return None, "fineweb.short_line_ratio"
        _, dup_chars = _duplicates(lines)
        if dup_chars / max(1, len(text.replace("\n", ""))) >= self.char_duplicates_ratio:
            return None, "fineweb.char_dup_ratio"
        if text.count("\n") / max(1, len(text.split())) > self.new_line_ratio:
            return None, "fineweb.new_line_ratio"
        return text, None


RULES: dict[str, type] = {
    "gopher_quality": GopherQuality,
    "gopher_repetition": GopherRepetition,
    "c4": C4,
    "fineweb": FineWeb,
}


def make_rules(rules: tuple) -> tuple:
    """Rule configs from names or configs (a name takes the published defaults)."""
    out = []
    for r in rules:
        if isinstance(r, str):
            if r not in RULES:
                raise ValueError(
                    f"unknown quality rule {r!r}; choose from {sorted(RULES)} or pass a rule config"
                )
            out.append(RULES[r]())
        elif hasattr(r, "apply") and hasattr(r, "name"):
            out.append(r)
        else:
            raise ValueError(
                f"a quality rule is a name or a rule config (GopherQuality(...), ...), got {r!r}"
            )
    return tuple(out)


def describe_rule(rule) -> dict:
    """The rule's name and every threshold (what enters the step's cache key)."""
    return {"rule": rule.name, "config": {k: v for k, v in asdict(rule).items() if k != "name"}}


def apply_rules(rules: tuple, text: str) -> tuple[str | None, str | None]:
    """Run the rules in order; the first drop wins."""
    for rule in rules:
        text, reason = rule.apply(text)
        if text is None:
            return None, reason
    return text, None
