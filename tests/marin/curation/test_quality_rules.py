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


@pytest.mark.parametrize("mark", ["...", "…"])
def test_gopher_ellipsis_lines_edge(mark):
    rule = GopherQuality()
    # 10 lines of 21 tokens: 4 ellipses in ~210 tokens stay far below the 0.1 ellipsis-per-word ratio
    lines = [prose(20)[:-1] + (f" {mark}" if i < 3 else ".") for i in range(10)]
    assert rule.apply("\n".join(lines))[1] is None  # 3 of 10 lines end in an ellipsis: 0.3 exactly
    lines[3] = lines[3][:-1] + f" {mark}"
    assert rule.apply("\n".join(lines))[1] == "gopher_quality.ellipsis_lines"  # 0.4


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


def test_gopher_duplicate_paragraph_characters_edge():
    rule = GopherRepetition(dup_para_frac=1.0, dup_line_frac=1.0)  # the line checks come after
    repeated = "abcdefghi."  # 10 characters, repeated once: 10 duplicate characters
    # 10 / 50 characters is 0.2 exactly (kept); 10 / 49 is over
    inside = "\n\n".join([repeated, "x" * 25 + ".", repeated])
    outside = "\n\n".join([repeated, "x" * 24 + ".", repeated])
    assert (len(inside), len(outside)) == (50, 49)
    assert rule.apply(inside)[1] is None
    assert rule.apply(outside)[1] == "gopher_repetition.dup_para_char_frac"


def test_gopher_duplicate_line_characters_edge():
    rule = GopherRepetition(dup_line_frac=1.0)
    repeated = "abcdefghi."
    inside = "\n".join([repeated, "x" * 27 + ".", repeated])  # 10 / 50
    outside = "\n".join([repeated, "x" * 26 + ".", repeated])  # 10 / 49
    assert (len(inside), len(outside)) == (50, 49)
    assert rule.apply(inside)[1] is None
    assert rule.apply(outside)[1] == "gopher_repetition.dup_line_char_frac"


def words_totalling(chars: int) -> list[str]:
    """Distinct words ("v000", ... and one shorter "xyz"-prefix word) of exactly `chars` characters."""
    full, rest = divmod(chars, 4)
    return [f"v{i:03d}" for i in range(full)] + (["xyz"[:rest]] if rest else [])


def gram_words(n: int, chars: int) -> list[str]:
    """`n` distinct one-letter-repeated words of `chars` characters in all."""
    base, extra = divmod(chars, n)
    return [chr(ord("a") + k) * (base + (k < extra)) for k in range(n)]


@pytest.mark.parametrize(
    "n, frac, count",
    [(2, 0.2, 4), (3, 0.18, 9), (4, 0.16, 4)],
)
def test_gopher_top_n_gram_edges(n, frac, count):
    rule = GopherRepetition(top_n_grams=((n, frac),), dup_n_grams=())
    gram = gram_words(n, 2 * n)  # two-letter words: the n-gram is 3n - 1 characters with its spaces
    top = len(" ".join(gram)) * count  # the characters the most frequent n-gram covers
    total = round(top / frac)  # all word characters, so that top / total == frac exactly
    assert top / total == frac
    repeats = gram * count
    for total_chars, reason in ((total, None), (total - 1, f"gopher_repetition.top_{n}_gram")):
        others = words_totalling(total_chars - 2 * n * count)
        text = " ".join(others[:10] + repeats + others[10:]) + "."
        assert rule.apply(text)[1] == reason, (n, total_chars)


@pytest.mark.parametrize("n, frac", [(5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10)])
def test_gopher_duplicate_n_gram_edges(n, frac):
    rule = GopherRepetition(top_n_grams=(), dup_n_grams=((n, frac),))
    covered = round(200 * frac)  # the second copy of the n-gram covers its words' characters
    gram = gram_words(n, covered)
    for total, reason in ((200, None), (199, f"gopher_repetition.dup_{n}_gram")):
        body = words_totalling(total - 2 * covered)
        text = " ".join(gram + body + gram) + "."
        assert covered / total == frac or reason is not None
        assert rule.apply(text)[1] == reason, (n, total)


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


def test_c4_max_word_length_edge():
    # a line with a word over max_word_length is removed, leaving 4 sentences: too few
    inside = "\n".join([SENTENCE] * 4 + ["The word " + "a" * 1000 + " ends here."])
    outside = "\n".join([SENTENCE] * 4 + ["The word " + "a" * 1001 + " ends here."])
    out, reason = C4().apply(inside)
    assert reason is None and "a" * 1000 in out
    assert C4().apply(outside)[1] == "c4.min_sentences"


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
    # 10 lines of 3 words: 9 newlines per 30 words is 0.3 exactly (kept, the rule drops above it);
    # one word fewer makes it 9 / 29
    lines = [" ".join(f"word{i}x{j}" for j in range(3)) + "." for i in range(10)]
    assert rule.apply("\n".join(lines))[1] is None
    lines[0] = "word0x0 word0x1."
    assert rule.apply("\n".join(lines))[1] == "fineweb.new_line_ratio"


def test_rules_run_in_order_and_the_first_drop_names_the_rule():
    rules = make_rules(("gopher_quality", "c4"))
    assert apply_rules(rules, "too short")[1] == "gopher_quality.min_doc_words"
    with pytest.raises(ValueError, match="unknown quality rule"):
        make_rules(("gopher",))
