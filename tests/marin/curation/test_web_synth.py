"""marin://web-synth: deterministic pages whose ground truth matches what the pages hold."""

from __future__ import annotations

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
