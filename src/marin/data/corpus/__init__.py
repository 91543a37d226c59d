"""The embedded corpus: short children's stories generated deterministically by this project.

`story(i)` is a pure function of `i`; `stories(start, stop)` yields a range of them. No third-party
text is involved: the word lists live in `lexicon.py`, the cast and setting of a story in
`scene.py`, the plots and their phrasings in `arcs.py`, the frame around them in `stories.py`.
`web.py` generates `marin://web-synth`, synthetic web pages with recorded duplicates, languages and
spam, for curation (see docs/curation.md), from the word lists in `web_words.py`.
"""

from marin.data.corpus.stories import CORPUS_SIZE, SOURCE_NAME, StoryRecord, stories, story, story_record

__all__ = ["CORPUS_SIZE", "SOURCE_NAME", "StoryRecord", "stories", "story", "story_record"]
