"""Fixtures of the zephyr tests: small JSONL inputs written as real files."""

from __future__ import annotations

from pathlib import Path

import pytest
from jsonl_files import write_jsonl


@pytest.fixture
def docs_dir(tmp_path: Path) -> Path:
    """Three JSONL files of ten documents each: ids 0..29, a text and a user."""
    directory = tmp_path / "docs"
    for f in range(3):
        records = [
            {"id": i, "text": f"doc {i} " + "word " * (i % 7), "user": f"u{i % 4}"}
            for i in range(f * 10, f * 10 + 10)
        ]
        write_jsonl(directory / f"docs-{f}.jsonl", records)
    return directory
