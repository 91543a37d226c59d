"""Helpers for zephyr tests: small JSONL inputs written as real files."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest


def write_jsonl(path: Path, records: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def read_jsonl_dir(directory: Path) -> list:
    """Records of every part-*.jsonl file in the directory, in file order."""
    records = []
    for part in sorted(directory.glob("part-*.jsonl")):
        records.extend(orjson.loads(line) for line in part.read_bytes().splitlines())
    return records


@pytest.fixture
def docs_dir(tmp_path: Path) -> Path:
    """Three JSONL files of ten documents each: ids 0..29, a text and a user."""
    directory = tmp_path / "docs"
    for f in range(3):
        records = [{"id": i, "text": f"doc {i} " + "word " * (i % 7), "user": f"u{i % 4}"}
                   for i in range(f * 10, f * 10 + 10)]
        write_jsonl(directory / f"docs-{f}.jsonl", records)
    return directory
