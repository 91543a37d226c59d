"""The embedded corpus: short children's stories generated deterministically by this project.

`story(i)` is a pure function of `i`; `stories(start, stop)` yields a range of them. No third-party
text is involved: every word list and sentence pattern lives in `lexicon.py` and `stories.py`.
`web.py` generates `marin://web-synth`, synthetic web pages with recorded duplicates, languages and
spam, for curation (see docs/curation.md).
"""

from marin.data.corpus.stories import CORPUS_SIZE, SOURCE_NAME, stories, story

__all__ = ["CORPUS_SIZE", "SOURCE_NAME", "stories", "story"]
