"""Documents out of files (local or fsspec): JSONL (.gz, .zst), Parquet and text, via zephyr's readers.

JSONL and Parquet records hold the text under `text_key`; a text file is one document per line
(blank lines are skipped). A malformed record (bad JSON, bad UTF-8, a missing or non-string text
field) is a `BadRecordError` naming file:line under `bad_records="fail"`, or is skipped and counted
in `stats` under `bad_records="skip"`.
"""

from __future__ import annotations

from collections.abc import Iterator
from operator import itemgetter

from zephyr import BadRecordError
from zephyr.io import BAD_RECORD_POLICIES, Position, ShardStats, infer_format, read_file

__all__ = [
    "BAD_RECORD_POLICIES",
    "BadRecordError",
    "ShardStats",
    "infer_format",
    "read_text_records",
    "read_texts",
    "report_bad",
]


def report_bad(bad_records: str, stats: ShardStats, where: str, line: int, reason: str) -> None:
    """Raise under "fail"; count and skip under "skip"."""
    if bad_records == "skip":
        stats.skip_bad(where, line, reason)
        return
    raise BadRecordError(where, line, reason)


def read_texts(path: str, text_key: str, bad_records: str, stats: ShardStats) -> Iterator[str]:
    """The documents of one file, in file order."""
    return map(itemgetter(0), read_text_records(path, text_key, bad_records, stats))


def read_text_records(
    path: str, text_key: str, bad_records: str, stats: ShardStats
) -> Iterator[tuple[str, dict | None]]:
    """(text, record) for each document of one file, in file order; the record is None in a text file."""
    fmt = infer_format(path)
    pos = Position()
    records = read_file(path, fmt, bad_records, pos, stats)
    if fmt == "text":
        for line in records:
            if line.strip():
                yield line, None
        return
    for record in records:
        text = record.get(text_key) if isinstance(record, dict) else None
        if isinstance(text, str):
            yield text, record
        elif isinstance(record, dict) and text_key in record:
            report_bad(
                bad_records,
                stats,
                path,
                pos.line,
                f"field {text_key!r} is {type(text).__name__}, not a string",
            )
        else:
            found = sorted(record)[:8] if isinstance(record, dict) else type(record).__name__
            report_bad(
                bad_records,
                stats,
                path,
                pos.line,
                f"no {text_key!r} field (found {found}); set text_key= to the field that holds the text",
            )
