"""Readers: stream the records of one input file, tracking the line being read and bad records.

JSONL yields parsed objects, text yields lines (str, without the newline), Parquet yields one dict
per row and reads one row group at a time. The format comes from the extension.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import orjson

from zephyr.errors import BadRecordError, PlanError
from zephyr.fileio import open_read, read_chunks, strip_compression

BAD_RECORD_POLICIES = ("fail", "skip")
MAX_BAD_EXAMPLES = 5

FORMAT_EXTENSIONS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".txt": "text",
    ".text": "text",
    ".parquet": "parquet",
}


def infer_format(path: str) -> str:
    """'jsonl', 'text' or 'parquet' from the file name (ignoring a .gz/.zst suffix)."""
    base = strip_compression(path)
    for ext, fmt in FORMAT_EXTENSIONS.items():
        if base.endswith(ext):
            return fmt
    raise PlanError(
        f"cannot tell the format of {path!r} from its extension (known: {', '.join(FORMAT_EXTENSIONS)}, "
        "optionally + .gz/.zst); pass format='jsonl', 'text' or 'parquet' to from_files"
    )


@dataclass
class Position:
    """Where a shard's reader is: the file and the 1-based record (line) number last read."""

    file: str | None = None
    line: int = 0


@dataclass
class ShardStats:
    """Counts kept while one shard runs: records read, records emitted, bad records skipped."""

    records_in: int = 0
    records_out: int = 0
    bad_records: int = 0
    bad_examples: list[str] = field(default_factory=list)

    def skip_bad(self, file: str, line: int, reason: str) -> None:
        self.bad_records += 1
        if len(self.bad_examples) < MAX_BAD_EXAMPLES:
            self.bad_examples.append(f"{file}:{line}: {reason}")


def read_file(path: str, fmt: str, bad_records: str, pos: Position, stats: ShardStats) -> Iterator:
    """Records of one file, in order; `pos` always names the record last yielded."""
    pos.file, pos.line = path, 0
    if fmt == "jsonl":
        return _read_jsonl(path, bad_records, pos, stats)
    if fmt == "text":
        return _read_text(path, bad_records, pos, stats)
    if fmt == "parquet":
        return _read_parquet(path, pos)
    raise PlanError(f"unknown input format {fmt!r}; use 'jsonl', 'text' or 'parquet'")


def _read_jsonl(path: str, bad_records: str, pos: Position, stats: ShardStats) -> Iterator:
    loads, decode_error = orjson.loads, orjson.JSONDecodeError
    line_no = 0
    with open_read(path) as stream:
        for block in _line_blocks(stream):
            for line in block:
                line_no += 1
                try:
                    record = loads(line)
                except decode_error as e:
                    if not line.strip():
                        continue  # blank lines separate nothing and carry no record
                    if bad_records == "skip":
                        stats.skip_bad(path, line_no, str(e))
                        continue
                    raise BadRecordError(path, line_no, f"invalid JSON ({e}): {line[:80]!r}") from None
                pos.line = line_no
                yield record


def _read_text(path: str, bad_records: str, pos: Position, stats: ShardStats) -> Iterator[str]:
    line_no = 0
    with open_read(path) as stream:
        for block in _line_blocks(stream):
            for line in block:
                line_no += 1
                try:
                    text = line.decode("utf-8")
                except UnicodeDecodeError as e:
                    if bad_records == "skip":
                        stats.skip_bad(path, line_no, str(e))
                        continue
                    raise BadRecordError(path, line_no, f"not UTF-8 ({e})") from None
                pos.line = line_no
                yield text.removesuffix("\r")


def _line_blocks(stream) -> Iterator[list[bytes]]:
    """Lists of complete lines (without b'\\n'), read a megabyte at a time; the last line may lack a newline."""
    rest = b""
    for chunk in read_chunks(stream):
        lines = (rest + chunk).split(b"\n") if rest else chunk.split(b"\n")
        rest = lines.pop()
        yield lines
    if rest:
        yield [rest]


def _read_parquet(path: str, pos: Position) -> Iterator[dict]:
    import pyarrow.parquet as pq

    row = 0
    with open_read(path) as stream:
        parquet = pq.ParquetFile(stream)
        for group in range(parquet.num_row_groups):
            for record in parquet.read_row_group(group).to_pylist():
                row += 1
                pos.line = row
                yield record
