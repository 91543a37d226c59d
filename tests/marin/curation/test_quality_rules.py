"""Each quality rule on hand-written documents on both sides of its thresholds."""

from __future__ import annotations

import pytest

from marin.curation.rules import C4, FineWeb, GopherQuality, GopherRepetition, apply_rules, make_rules

FILLER = [
    "river",
    "bridge",
    "village",
    "harbor",
    "museum",
    "garden",
    "market",
    "engine",
    "tower",
    "library",
    "valley",
    "forest",
]


def prose(n_words: int, stop_word_every: int = 5) -> str:
    """`n_words` words, a stop word ("the", "and") every `stop_word_every`, all alphabetic, average length ~5."""
    stop = ("the", "and")
    words = [
        stop[(i // stop_word_every) % 2] if i % stop_word_every == 0 else FILLER[i % len(FILLER)]
        for i in range(n_words)
    ]
    return " ".join(words) + "."


# -- Gopher quality ---------------------------------------------------------------------------------
def test_gopher_min_doc_words_edge():
    rule = GopherQuality()
    assert rule.apply(prose(50))[1] is None
    assert rule.apply(prose(49))[1] == "gopher_quality.min_doc_words"


def test_gopher_max_doc_words_edge():
    rule = GopherQuality(max_doc_words=60)
    assert rule.apply(prose(60))[1] is None
    assert rule.apply(prose(61))[1] == "gopher_quality.max_doc_words"


def test_gopher_average_word_length_edges():
    rule = GopherQuality(min_doc_words=1, min_stop_words=0)
    assert rule.apply(" ".join(["abc"] * 60))[1] is None  # exactly 3.0
    assert rule.apply(" ".join(["abc", "ab"] * 30))[1] == "gopher_quality.min_avg_word_length"
    assert rule.apply(" ".join(["abcdefghij"] * 60))[1] is None  # exactly 10.0
    assert rule.apply(" ".join(["abcdefghijk"] * 60))[1] == "gopher_quality.max_avg_word_length"


def test_gopher_hash_ratio_edge():
    rule = GopherQuality()
    base = prose(90)
    # words_of counts each "#" run as one token: 10 hashes in 100 tokens is 0.1 (kept), 11 in 101 is over
    assert rule.apply(base + " #" * 10)[1] is None
    assert rule.apply(base + " #" * 12)[1] == "gopher_quality.hash_ratio"


def test_gopher_ellipsis_lines_edge():
    rule = GopherQuality()
    lines = [prose(20)[:-1] + (" ..." if i < 3 else ".") for i in range(10)]
    assert rule.apply("\n".join(lines))[1] is None  # 3 of 10 lines: 0.3
    lines[3] = lines[3][:-1] + " ..."
    assert rule.apply("\n".join(lines))[1] in (
        "gopher_quality.ellipsis_lines",
        "gopher_quality.ellipsis_ratio",
    )


def test_gopher_bullet_lines_edge():
    rule = GopherQuality()
    lines = [("- " if i < 9 else "") + prose(10) for i in range(10)]
    assert rule.apply("\n".join(lines))[1] is None  # 0.9 exactly
    assert rule.apply("\n".join("- " + prose(10) for _ in range(10)))[1] == "gopher_quality.bullet_lines"


def test_gopher_alpha_words_edge():
    rule = GopherQuality(min_avg_word_length=1)
    words = prose(80)[:-1].split()
    kept = " ".join(words + ["123"] * 20)  # 80 of 100 have a letter: 0.8
    dropped = " ".join(words + ["123"] * 21)
    assert rule.apply(kept)[1] is None
    assert rule.apply(dropped)[1] == "gopher_quality.alpha_words"


def test_gopher_stop_words_edge():
    rule = GopherQuality()
    no_stop = [FILLER[i % len(FILLER)] for i in range(60)]
    assert rule.apply(" ".join(["the", "of"] + no_stop))[1] is None
    assert (
        rule.apply(" ".join(["the"] * 5 + no_stop))[1] == "gopher_quality.stop_words"
    )  # distinct ones count


# -- Gopher repetition ------------------------------------------------------------------------------
def unique_line(i: int) -> str:
    return f"line {i} " + " ".join(f"w{i}x{j}" for j in range(6)) + "."


def test_gopher_duplicate_line_fraction_edge():
    rule = GopherRepetition(dup_line_char_frac=1.0, top_n_grams=(), dup_n_grams=())
    lines = [unique_line(i) for i in range(7)] + [unique_line(0)] * 3  # 3 of 10 repeat: 0.3
    assert rule.apply("\n".join(lines))[1] is None
    lines = [unique_line(i) for i in range(6)] + [unique_line(0)] * 4
    assert rule.apply("\n".join(lines))[1] == "gopher_repetition.dup_line_frac"


def test_gopher_duplicate_paragraph_fraction():
    rule = GopherRepetition()
    paragraphs = [unique_line(i) for i in range(6)] + [unique_line(0)] * 4
    assert rule.apply("\n\n".join(paragraphs))[1] == "gopher_repetition.dup_para_frac"


def test_gopher_top_2_gram_edge():
    rule = GopherRepetition(top_n_grams=((2, 0.2),), dup_n_grams=())
    other = [f"u{i:03d}" for i in range(80)]  # 4-char words; the bigram "ab cd" is 4 chars
    # 10 occurrences of "ab cd": 10*4 chars of 80*4 + 10*4 = 40/360 < 0.2; 25: 100/420 > 0.2
    few = " ".join(other[:40] + ["ab", "cd"] * 10 + other[40:])
    many = " ".join(other[:40] + ["ab", "cd"] * 25 + other[40:])
    assert rule.apply(few)[1] is None
    assert rule.apply(many)[1] == "gopher_repetition.top_2_gram"


def test_gopher_duplicate_5_gram_edge():
    rule = GopherRepetition(top_n_grams=(), dup_n_grams=((5, 0.15),))
    gram = ["aaaa", "bbbb", "cccc", "dddd", "eeee"]
    body = [f"w{i:03d}" for i in range(100)]  # 4 chars each, like the gram's words
    # the second copy covers 5 words = 20 chars; the total is 4 * (len(body) + 10)
    assert rule.apply(" ".join(gram + body + gram))[1] is None  # 20/440
    assert rule.apply(" ".join(gram + body[:10] + gram))[1] == "gopher_repetition.dup_5_gram"  # 20/80


# -- C4 -----------------------------------------------------------------------------------------------
SENTENCE = "The baker painted the old bridge near the harbor."


def test_c4_keeps_five_sentences_and_drops_four():
    assert C4().apply("\n".join([SENTENCE] * 5))[1] is None
    assert C4().apply("\n".join([SENTENCE] * 4))[1] == "c4.min_sentences"


def test_c4_removes_bad_lines_before_counting():
    text = "\n".join(
        [SENTENCE] * 5
        + ["Menu Home About", "Enable javascript to continue.", "This site uses cookies.", "Too short."]
    )
    out, reason = C4().apply(text)
    assert reason is None and out == "\n".join([SENTENCE] * 5)
    assert C4().apply("\n".join([SENTENCE] * 4 + ["Enable javascript to see this."]))[1] == "c4.min_sentences"


@pytest.mark.parametrize(
    "bad, reason",
    [("Lorem ipsum dolor sit amet.", "c4.lorem_ipsum"), ("The code is { x }.", "c4.curly_bracket")],
)
def test_c4_document_level_drops(bad, reason):
    assert C4().apply("\n".join([SENTENCE] * 6 + [bad]))[1] == reason


def test_c4_min_words_per_line_edge():
    three = "Bake it now."
    assert C4(min_sentences=5).apply("\n".join([three] * 5))[1] is None
    assert C4(min_sentences=5).apply("\n".join(["Bake now."] * 5))[1] == "c4.min_sentences"


# -- FineWeb ------------------------------------------------------------------------------------------
def long_line(i: int, end: str = ".") -> str:
    return f"this is line number {i} of a document about rivers and bridges" + end


def test_fineweb_line_punctuation_edge():
    rule = FineWeb(short_line_thr=1.1, char_duplicates_ratio=1.0, new_line_ratio=10)
    # 0.12 of lines ending in punctuation is dropped (<=), above it kept: 3/25 = 0.12, 4/25 = 0.16
    lines = [long_line(i, "." if i < 3 else "") for i in range(25)]
    assert rule.apply("\n".join(lines))[1] == "fineweb.line_punct_ratio"
    lines[3] = long_line(3)
    assert rule.apply("\n".join(lines))[1] is None


def test_fineweb_short_lines_edge():
    rule = FineWeb(char_duplicates_ratio=1.0, new_line_ratio=10)
    assert rule.apply("\n".join(["short 1.", "short 2.", long_line(0)]))[1] is None  # 2/3 = 0.666 < 0.67
    assert (
        rule.apply("\n".join([f"short {i}." for i in range(67)] + [long_line(i) for i in range(33)]))[1]
        == "fineweb.short_line_ratio"
    )
    assert (
        rule.apply("\n".join([f"short {i}." for i in range(66)] + [long_line(i) for i in range(34)]))[1]
        is None
    )


def test_fineweb_duplicate_characters_edge():
    rule = FineWeb(new_line_ratio=10)
    lines = [long_line(i) for i in range(200)]
    text_chars = len("".join(lines))
    assert len(lines[0]) / text_chars < 0.01
    assert rule.apply("\n".join(lines + [lines[0]]))[1] is None
    assert rule.apply("\n".join(lines + lines[:3]))[1] == "fineweb.char_dup_ratio"


def test_fineweb_new_line_ratio_edge():
    rule = FineWeb(short_line_thr=1.1, char_duplicates_ratio=1.0)
    # 10 words per line: 3 newlines per 10 words is 0.3 (kept); shorter lines exceed it
    ten = [" ".join(f"word{i}x{j}" for j in range(10)) + "." for i in range(31)]
    assert rule.apply("\n".join(ten))[1] is None
    three = [" ".join(f"word{i}x{j}" for j in range(3)) + "." for i in range(31)]
    assert rule.apply("\n".join(three))[1] == "fineweb.new_line_ratio"


def test_rules_run_in_order_and_the_first_drop_names_the_rule():
    rules = make_rules(("gopher_quality", "c4"))
    assert apply_rules(rules, "too short")[1] == "gopher_quality.min_doc_words"
    with pytest.raises(ValueError, match="unknown quality rule"):
        make_rules(("gopher",))
