"""marin://web-synth: deterministic pages whose ground truth matches what the pages hold."""

from __future__ import annotations

import re
from collections import Counter

from marin.curation.extract import html_to_text
from marin.curation.filters import identify_language
from marin.data.corpus.web import main_text, page, pages, truth


def test_pages_are_a_pure_function_of_index_and_seed():
    assert list(pages(10, 20)) == [page(i) for i in range(10, 20)]
    assert page(5) == page(5) and page(5, seed=1) != page(5)


def test_the_corpus_holds_every_kind_it_promises():
    kinds = Counter(truth(i).kind for i in range(1000))
    assert set(kinds) == {"clean", "exact_dup", "near_dup", "foreign", "spam"}
    spam = Counter(truth(i).spam for i in range(1000) if truth(i).kind == "spam")
    assert set(spam) == {"repetition", "symbols", "short_lines", "keywords"}


def test_exact_duplicates_extract_to_their_originals_text_and_boilerplate_is_removed():
    for i in range(300):
        t = truth(i)
        if t.kind == "exact_dup":
            j = int(t.dup_of.split("-")[1])
            assert main_text(i)[0] == main_text(j)[0]
            text = html_to_text(page(i)["html"])
            assert main_text(i)[0].split("\n\n")[0] in text
            assert "All rights reserved" not in text and "Privacy Policy" not in text


def test_foreign_pages_are_identified_as_their_recorded_language():
    foreign = [truth(i) for i in range(400) if truth(i).kind == "foreign"]
    assert len({t.lang for t in foreign}) == 3
    assert all(identify_language(main_text(int(t.id.split("-")[1]))[0])[0] == t.lang for t in foreign)


def test_a_graded_corpus_keeps_every_top_grade_page_and_every_other_kind_as_it_was():
    for i in range(300):
        t, graded = truth(i), truth(i, grades=4)
        if graded.grade in (None, 3):
            assert page(i, grades=4) == page(i)
        assert (graded.kind, graded.dup_of, graded.spam, graded.lang) == (t.kind, t.dup_of, t.spam, t.lang)
        assert (graded.grade is None) == (t.kind in ("foreign", "spam"))
    assert {truth(i, grades=4).grade for i in range(300)} == {None, 0, 1, 2, 3}


def test_a_lower_grade_shuffles_more_sentences_and_keeps_the_words():
    shuffled = {g: [] for g in range(4)}
    for i in range(400):
        t = truth(i, grades=4)
        if t.kind != "clean":
            continue
        coherent, graded = main_text(i)[0], main_text(i, grades=4)[0]
        assert sorted(re.findall(r"\w+", coherent.lower())) == sorted(re.findall(r"\w+", graded.lower()))
        assert graded.count(".") == coherent.count(".") and graded.count("\n") == coherent.count("\n")
        a, b = coherent.split(". "), graded.split(". ")
        shuffled[t.grade].append(sum(x != y for x, y in zip(a, b, strict=True)) / len(a))
    means = [sum(v) / len(v) for _, v in sorted(shuffled.items())]
    assert means[3] == 0 and means[0] > means[1] > means[2] > 0.2


def test_the_rules_do_not_see_the_grade(tmp_path):
    from marin.curation.rules import apply_rules, make_rules

    rules = make_rules(("gopher_quality", "gopher_repetition", "c4", "fineweb"))
    kept = {g: [] for g in range(4)}
    for i in range(600):
        t = truth(i, grades=4)
        if t.kind == "clean":
            kept[t.grade].append(apply_rules(rules, main_text(i, grades=4)[0])[0] is not None)
    rates = [sum(v) / len(v) for _, v in sorted(kept.items())]
    assert max(rates) - min(rates) < 0.05, rates
