"""The embedded corpora's text is pinned byte for byte: the demo's token cache, the curation tests'
expected counts and every key of a step that reads them depend on it. A refactor of the generators
(word lists moved between modules, say) must leave these digests as they are; a deliberate change
of the text updates them and says so in its note.

The pages and their truths are pinned apart: a field added to `Truth` (the graded corpus's `grade`)
changes the truths' digest only, and the pages' digest proves the text did not move."""

from __future__ import annotations

import dataclasses
import hashlib
import json

from marin.data.corpus import stories
from marin.data.corpus.web import pages, truth

STORIES_0_2000 = "0ad4b28337572857b564e2d8ba8f7eaa28cfa7883d64a9ff8e66f6d873a92613"
# the pages alone: unchanged since the corpus was written
WEB_PAGES_0_1000 = "f29165298248d44d51f67dcefca998d54d25c109b79d1c0f06ab2d1aeb2ad33a"
WEB_PAGES_0_1000_SEED_3 = "0c8a8d2c8b5b2b887547fa57c744cca309bbaf6613294bf85fb73ff0590156eb"
# the pages with their truths (`grade` joined Truth with the graded corpus; the pages did not change)
WEB_TRUTHS_0_1000 = "cb4d976c81ad9ac9da0c893b0dcc1411ec22c2fe5979a905e05592042a808880"
WEB_TRUTHS_0_1000_SEED_3 = "aa1c1b2103bfb76cd6dfe913b61e7b39b31d8df16535828de81576dadc596971"
WEB_GRADED_4_0_1000 = "8f60303860acfefdf32e8d5130eb057f295df5b9b152d67fc5d21a18f2f4f002"


def _stories_digest() -> str:
    h = hashlib.sha256()
    for text in stories(0, 2000):
        h.update(text.encode() + b"\0")
    return h.hexdigest()


def _pages_digest(seed: int, grades: int = 1, with_truth: bool = True) -> str:
    h = hashlib.sha256()
    for i, p in enumerate(pages(0, 1000, seed, grades)):
        item = [p, dataclasses.asdict(truth(i, seed, grades))] if with_truth else p
        h.update(json.dumps(item, sort_keys=True).encode() + b"\0")
    return h.hexdigest()


def test_the_first_2000_stories_are_the_bytes_they_always_were():
    assert _stories_digest() == STORIES_0_2000


def test_the_first_1000_web_pages_are_the_bytes_they_always_were():
    assert _pages_digest(0, with_truth=False) == WEB_PAGES_0_1000
    assert _pages_digest(3, with_truth=False) == WEB_PAGES_0_1000_SEED_3


def test_the_first_1000_web_pages_with_their_truths_are_pinned():
    assert _pages_digest(0) == WEB_TRUTHS_0_1000
    assert _pages_digest(3) == WEB_TRUTHS_0_1000_SEED_3
    assert _pages_digest(0, grades=4) == WEB_GRADED_4_0_1000
