"""`marin_tokenizer`: the tokenizer the tutorials tokenize with.

Selection (read once, at import), by the environment variable MARIN_TOKENIZER:
- unset or "demo": a byte-level BPE trained by a pipeline step on the embedded story corpus
  (`marin://tinystories-synth`). This is what the offline demo uses: it needs no network, and its
  small vocabulary (at most 4,096 ids) keeps the nano model's embedding table tiny, so CPU training
  is fast and the loss falls within the demo's few steps.
- "hub": the Marin tokenizer from the Hugging Face hub (`stanford-crfm/marin-tokenizer`, a Llama-3
  style byte-level BPE with ~128k ids), for users with network access or a warm HF cache.
- anything else: that hub id or tokenizer folder, e.g. MARIN_TOKENIZER=gpt2 or MARIN_TOKENIZER=/path/to/tok.
"""

from __future__ import annotations

import os

from marin.data.corpus import SOURCE_NAME
from marin.experiment.data import train_tokenizer

MARIN_HUB_TOKENIZER = "stanford-crfm/marin-tokenizer"

marin_demo_tokenizer = train_tokenizer(
    name="tokenizers/marin-demo-bpe",
    source=SOURCE_NAME,
    vocab_size=4096,
    sample_count=20_000,
)


def select_tokenizer(choice: str | None):
    """The tokenizer for a MARIN_TOKENIZER value (None or "demo": the trained demo tokenizer)."""
    if choice is None or choice.strip() in ("", "demo"):
        return marin_demo_tokenizer
    if choice.strip() == "hub":
        return MARIN_HUB_TOKENIZER
    return choice.strip()


marin_tokenizer = select_tokenizer(os.environ.get("MARIN_TOKENIZER"))
