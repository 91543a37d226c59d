"""The embedded corpora's text is pinned byte for byte: the demo's token cache, the curation tests'
expected counts and every key of a step that reads them depend on it. A refactor of the generators
(word lists moved between modules, say) must leave these digests as they are; a deliberate change
of the text updates them and says so in its note."""

from __future__ import annotations

import dataclasses
import hashlib
import json

from marin.data.corpus import stories
from marin.data.corpus.web import pages, truth

STORIES_0_2000 = "0ad4b28337572857b564e2d8ba8f7eaa28cfa7883d64a9ff8e66f6d873a92613"
WEB_PAGES_0_1000 = "607d1080bc5e47aca9d6563708b333e386133cd3eb01f5508060ccf43f7669e6"
WEB_PAGES_0_1000_SEED_3 = "e50695a82333db63e04ce75c41dba4d9fc7d8d1c1b7eda3c6989ce6fdc8768e4"


def _stories_digest() -> str:
    h = hashlib.sha256()
    for text in stories(0, 2000):
        h.update(text.encode() + b"\0")
    return h.hexdigest()


def _pages_digest(seed: int) -> str:
    h = hashlib.sha256()
    for i, p in enumerate(pages(0, 1000, seed)):
        h.update(json.dumps([p, dataclasses.asdict(truth(i, seed))], sort_keys=True).encode() + b"\0")
    return h.hexdigest()


def test_the_first_2000_stories_are_the_bytes_they_always_were():
    assert _stories_digest() == STORIES_0_2000


def test_the_first_1000_web_pages_and_their_truths_are_the_bytes_they_always_were():
    assert _pages_digest(0) == WEB_PAGES_0_1000
    assert _pages_digest(3) == WEB_PAGES_0_1000_SEED_3
