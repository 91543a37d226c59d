"""Small JSONL inputs and outputs of the zephyr tests, as real files."""

from __future__ import annotations

from pathlib import Path

import orjson


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
