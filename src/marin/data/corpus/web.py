"""`marin://web-synth`: deterministic synthetic web pages with known duplicates, languages and spam.

`page(i, seed)` is a pure function of its arguments: an HTML page with boilerplate (menu, cookie
banner, footer) around a main text. `truth(i, seed)` says what the generator made it:
- "clean": a unique English article;
- "exact_dup": the same article as an earlier clean page (`dup_of`), new boilerplate;
- "near_dup": an earlier clean page's article with words replaced so that the word 5-gram Jaccard
  of the two main texts is `jaccard` (computed exactly, recorded);
- "foreign": an article in German, French or Spanish (`lang`);
- "spam": a low-quality page (`spam` says which kind: repetition, symbols, short_lines, keywords).
All word lists are written for this project (`web_words.py`).

A graded corpus (`grades=G` > 1, `marin://web-synth?grades=G`) adds a quality signal that no rule
sees: each clean article gets a hidden `grade` in 0..G-1, and a share (G-1-grade)/(G-1) of its
sentences has its words shuffled (the first word re-capitalised, the full stop kept), so the words,
their lengths, the punctuation and the line structure are those of a coherent article; only the
word order differs. The top grade is the article exactly as in the ungraded corpus; duplicates copy
their original's graded text and grade. `grades=1` (the default) is the corpus as it always was.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass

from marin.data.corpus.web_words import (
    ADJ,
    ADV,
    FOREIGN,
    FOREIGN_WORDS,
    NOUN,
    PLACE,
    PREP,
    SPAM_KEYWORDS,
    SPAM_SYMBOLS,
    VERB,
)

SOURCE_NAME = "marin://web-synth"
DEFAULT_PAGES = 10_000
NEAR_DUP_JACCARDS = (0.97, 0.93, 0.9, 0.85, 0.6, 0.4)

_MIX = 0x5EB_5A7


@dataclass(frozen=True)
class Truth:
    """What page `i` is (see the module docstring)."""

    id: str
    kind: str
    lang: str = "en"
    dup_of: str | None = None
    jaccard: float | None = None
    spam: str | None = None
    grade: int | None = None  # graded corpora only: the article's grade, 0 (worst) .. grades-1 (coherent)


def page_id(i: int) -> str:
    return f"web-{i:07d}"


def _rng(i: int, seed: int, salt: int = 0) -> random.Random:
    return random.Random((i * 1_000_003) ^ (seed * 7919) ^ _MIX ^ (salt << 40))


def _role(i: int, seed: int) -> str:
    if i < 20:
        return "clean"  # the first pages are originals, so duplicates always have somewhere to point
    x = _rng(i, seed, 1).random()
    return (
        "clean"
        if x < 0.60
        else "exact_dup"
        if x < 0.67
        else "near_dup"
        if x < 0.82
        else "foreign"
        if x < 0.90
        else "spam"
    )


def _source_page(i: int, seed: int) -> int:
    """An earlier clean page (the original a duplicate copies)."""
    rng = _rng(i, seed, 2)
    j = rng.randrange(0, i)
    while _role(j, seed) != "clean":
        j -= 1
    return j


def _sentence(rng: random.Random) -> str:
    a, n, v, p = rng.choice, NOUN, VERB, PREP
    pattern = rng.randrange(5)
    if pattern == 0:
        s = f"the {a(ADJ)} {a(n)} {a(v)} the {a(n)} {a(p)} the {a(ADJ)} {a(n)}"
    elif pattern == 1:
        s = f"in {a(PLACE)}, a {a(n)} and a {a(n)} {a(ADV)} {a(v)} the {a(ADJ)} {a(n)} of the {a(n)}"
    elif pattern == 2:
        s = f"people say that the {a(n)} {a(v)} a {a(ADJ)} {a(n)} with the {a(n)} {a(p)} {a(PLACE)}"
    elif pattern == 3:
        s = f"after the {a(ADJ)} {a(n)}, the {a(n)} of {a(PLACE)} {a(v)} {rng.randint(2, 90)} {a(n)}s to be {a(ADJ)}"
    else:
        s = f"we {a(v)} the {a(n)} {a(p)} the {a(n)} and {a(v)} a {a(ADJ)} {a(n)} for the {a(n)}"
    return s[0].upper() + s[1:] + "."


def _article_sentences(j: int, seed: int) -> list[list[str]]:
    """The sentences of clean page `j`, by paragraph."""
    rng = _rng(j, seed, 3)
    return [[_sentence(rng) for _ in range(rng.randint(3, 6))] for _ in range(rng.randint(3, 6))]


def grade_of(j: int, seed: int, grades: int) -> int | None:
    """The hidden grade of clean page `j` in a corpus of `grades` grades (None when ungraded)."""
    return _rng(j, seed, 8).randrange(grades) if grades > 1 else None


def _shuffled(sentence: str, rng: random.Random) -> str:
    words = sentence[:-1].split()
    words[0] = words[0][0].lower() + words[0][1:]
    rng.shuffle(words)
    s = " ".join(words)
    return s[0].upper() + s[1:] + "."


def article(j: int, seed: int, grades: int = 1) -> list[list[str]]:
    """The main text of clean page `j`: paragraphs of whitespace-separated tokens, degraded to the
    page's grade in a graded corpus (see the module docstring)."""
    paragraphs = _article_sentences(j, seed)
    grade = grade_of(j, seed, grades)
    if grade is not None and grade < grades - 1:
        rng = _rng(j, seed, 9)
        places = [(p, k) for p, para in enumerate(paragraphs) for k in range(len(para))]
        share = (grades - 1 - grade) / (grades - 1)
        for p, k in rng.sample(places, round(share * len(places))):
            paragraphs[p][k] = _shuffled(paragraphs[p][k], rng)
    return [" ".join(para).split() for para in paragraphs]


def _tokens_text(paragraphs: list[list[str]]) -> str:
    return "\n\n".join(" ".join(p) for p in paragraphs)


_WORD = re.compile(r"\w+")


def _shingles(text: str, n: int = 5) -> set[str]:
    words = _WORD.findall(text.lower())
    return {" ".join(words[k : k + n]) for k in range(len(words) - n + 1)}


def _near_dup(paragraphs: list[list[str]], target: float, rng: random.Random) -> list[list[str]]:
    """Replace words spaced 5 apart until the 5-gram Jaccard reaches `target` (each swap breaks 5 shingles)."""
    flat = [(pi, ti) for pi, p in enumerate(paragraphs) for ti in range(len(p))]
    shingle_count = max(1, len(flat) - 4)
    swaps = max(1, round(shingle_count * (1 - target) / (5 * (1 + target))))
    slots = list(range(2, len(flat) - 2, 5))
    rng.shuffle(slots)
    out = [list(p) for p in paragraphs]
    for k in sorted(slots[:swaps]):
        pi, ti = flat[k]
        token = out[pi][ti]
        core = token.rstrip(".,")
        out[pi][ti] = f"zq{rng.randrange(10**6)}{core.lower()}" + token[len(core) :]
    return out


def _spam(i: int, seed: int) -> tuple[str, str]:
    rng = _rng(i, seed, 4)
    kind = rng.choice(("repetition", "symbols", "short_lines", "keywords"))
    if kind == "repetition":
        line = _sentence(rng)
        return kind, "\n".join([line] * rng.randint(15, 30))
    if kind == "symbols":
        return kind, " ".join(
            rng.choice(SPAM_SYMBOLS) + rng.choice(("", "#")) for _ in range(rng.randint(80, 200))
        )
    if kind == "short_lines":
        return kind, "\n".join(f"{rng.choice(ADJ)} {rng.choice(NOUN)}" for _ in range(rng.randint(20, 40)))
    words = [rng.choice(SPAM_KEYWORDS) for _ in range(4)]
    return kind, " ".join(words * rng.randint(20, 40))


def _foreign(i: int, seed: int) -> tuple[str, str]:
    rng = _rng(i, seed, 5)
    lang = rng.choice(sorted(FOREIGN))
    words = FOREIGN_WORDS[lang]
    paragraphs = []
    for _ in range(rng.randint(3, 5)):
        sentences = [
            rng.choice(FOREIGN[lang]).format(n=rng.choice(words[:5]), a=rng.choice(words[5:]))
            for _ in range(rng.randint(3, 6))
        ]
        paragraphs.append(" ".join(sentences))
    return lang, "\n\n".join(paragraphs)


def main_text(i: int, seed: int = 0, grades: int = 1) -> tuple[str, Truth]:
    """The main text of page `i` and the ground truth about it."""
    role = _role(i, seed)
    pid = page_id(i)
    if role == "clean":
        return _tokens_text(article(i, seed, grades)), Truth(pid, "clean", grade=grade_of(i, seed, grades))
    if role == "exact_dup":
        j = _source_page(i, seed)
        grade = grade_of(j, seed, grades)
        text = _tokens_text(article(j, seed, grades))
        return text, Truth(pid, "exact_dup", dup_of=page_id(j), jaccard=1.0, grade=grade)
    if role == "near_dup":
        j = _source_page(i, seed)
        rng = _rng(i, seed, 6)
        original = article(j, seed, grades)
        text = _tokens_text(_near_dup(original, rng.choice(NEAR_DUP_JACCARDS), rng))
        a, b = _shingles(_tokens_text(original)), _shingles(text)
        jaccard = round(len(a & b) / len(a | b), 4)
        return text, Truth(
            pid, "near_dup", dup_of=page_id(j), jaccard=jaccard, grade=grade_of(j, seed, grades)
        )
    if role == "foreign":
        lang, text = _foreign(i, seed)
        return text, Truth(pid, "foreign", lang=lang)
    kind, text = _spam(i, seed)
    return text, Truth(pid, "spam", spam=kind)


def _boilerplate(i: int, seed: int) -> tuple[str, str, str]:
    rng = _rng(i, seed, 7)
    site = rng.choice(PLACE)
    menu = "".join(f'<li><a href="/{w}">{w.title()}</a></li>' for w in rng.sample(NOUN, 6))
    header = (
        f'<header><div class="logo">{site} Daily</div><nav><ul>{menu}</ul></nav></header>'
        f'<div class="cookie-banner">This site uses cookies to improve your experience. '
        f"<button>Accept all</button></div>"
    )
    aside = "".join(
        f'<li><a href="/p/{rng.randrange(10**5)}">{rng.choice(ADJ).title()} {rng.choice(NOUN)}</a></li>'
        for _ in range(5)
    )
    footer = (
        f'<aside class="sidebar"><h3>Popular</h3><ul>{aside}</ul></aside>'
        f"<footer><p>© {rng.randint(2001, 2025)} {site} Daily. All rights reserved.</p>"
        f'<p><a href="/privacy">Privacy Policy</a> | <a href="/terms">Terms of Use</a></p></footer>'
    )
    return site, header, footer


def page(i: int, seed: int = 0, grades: int = 1) -> dict:
    """Page `i` as a record: {"id", "url", "html"}."""
    text, truth = main_text(i, seed, grades)
    site, header, footer = _boilerplate(i, seed)
    title = " ".join(text.split()[:6]).rstrip(".,")
    lang = truth.lang
    body = (
        "".join(f"<p>{p}</p>" for p in text.split("\n\n"))
        if truth.kind != "spam"
        else "".join(f"<p>{line}</p>" for line in text.split("\n"))
    )
    html = (
        f'<!DOCTYPE html><html lang="{lang}"><head><meta charset="utf-8"><title>{title}</title></head>'
        f"<body>{header}<main><article><h1>{title}</h1>{body}</article></main>{footer}</body></html>"
    )
    return {"id": truth.id, "url": f"https://{site.lower()}.example/{i}", "html": html}


def pages(start: int, stop: int, seed: int = 0, grades: int = 1) -> Iterator[dict]:
    """Pages `start` up to `stop`."""
    return (page(i, seed, grades) for i in range(start, stop))


def truth(i: int, seed: int = 0, grades: int = 1) -> Truth:
    """The ground truth of page `i`."""
    return main_text(i, seed, grades)[1]
