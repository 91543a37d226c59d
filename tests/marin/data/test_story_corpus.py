"""The embedded corpus: deterministic, indexable, distinct, and made of plain sentences."""

from __future__ import annotations

import subprocess
import sys

from marin.data.corpus import CORPUS_SIZE, stories, story


def test_story_is_a_pure_function_of_its_index():
    forward = [story(i) for i in range(50)]
    backward = [story(i) for i in reversed(range(50))][::-1]
    assert forward == backward == list(stories(0, 50))


def test_stories_are_identical_in_a_fresh_interpreter():
    code = "from marin.data.corpus import story; import hashlib; print(hashlib.sha256(''.join(story(i) for i in range(200)).encode()).hexdigest())"  # noqa: E501 (a script in a string)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    import hashlib

    assert out == hashlib.sha256("".join(story(i) for i in range(200)).encode()).hexdigest()


def test_corpus_holds_tens_of_thousands_of_distinct_stories():
    texts = list(stories(0, 20_000))
    assert CORPUS_SIZE >= 20_000
    assert len(set(texts)) == len(texts)


def test_stories_are_short_paragraphs_of_simple_sentences():
    for text in stories(0, 200):
        assert 150 < len(text) < 2_000
        assert text.count("\n\n") == 2
        assert text[0].isupper() and text.rstrip()[-1] in '.!?"'
        assert text.isascii()


def test_corpus_uses_varied_vocabulary():
    words = {w.strip(".,!?\"'").lower() for text in stories(0, 2_000) for w in text.split()}
    assert len(words) > 500
