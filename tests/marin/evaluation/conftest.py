"""Fixtures of the evaluation tests: a real tiny Hugging Face export and stories to score."""

from __future__ import annotations

import pytest

from tests.marin.evaluation.tiny_hf import build_tiny_export, held_out_stories


@pytest.fixture(scope="session")
def tiny_export(tmp_path_factory) -> str:
    """A tokenizer + randomly initialised Llama (48-token context) saved with save_pretrained."""
    return str(build_tiny_export(tmp_path_factory.mktemp("tiny_hf")))


@pytest.fixture(scope="session")
def stories() -> list[str]:
    """Held-out corpus stories (not used to train the tokenizer), longer than the model's context."""
    return held_out_stories(12)
