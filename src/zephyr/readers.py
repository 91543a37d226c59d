"""Readers: stream the records of one input file, tracking the line being read and bad records.

JSONL yields parsed objects, text yields lines (str, without the newline), Parquet yields one dict
per row and reads one row group at a time. The format comes from the extension.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain

import orjson

from storage import compression_of, open_file, open_read, read_chunks, strip_compression
from zephyr.errors import BadRecordError, PlanError

BAD_RECORD_POLICIES = ("fail", "skip")
MAX_BAD_EXAMPLES = 5
_DECODE_BATCH = 256

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


class Position:
    """Where a shard's reader is: the file and the 1-based line (record) number last handed on.

    Readers that decode a whole block of lines at once register the block's iterator instead of
    updating a counter per record; the line is then worked out from how far that iterator got,
    only when someone asks (an error report).
    """

    __slots__ = ("file", "_line", "_block", "_block_size", "_block_lines")

    def __init__(self) -> None:
        self.file: str | None = None
        self._line = 0
        self._block = None
        self._block_size = 0
        self._block_lines: list[int] | None = None

    @property
    def line(self) -> int:
        if self._block is None:
            return self._line
        handed_on = self._block_size - self._block.__length_hint__()
        if handed_on == 0:
            return self._line  # the line before the block
        if self._block_lines is not None:
            return self._block_lines[handed_on - 1]
        return self._line + handed_on

    @line.setter
    def line(self, value: int) -> None:
        self._line, self._block = value, None

    def start_block(self, line_before: int, block: Iterator, size: int, lines: list[int] | None) -> None:
        """Records of `block` come from lines line_before+1.. (or exactly `lines`, when some were skipped)."""
        self._line, self._block, self._block_size, self._block_lines = line_before, block, size, lines


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


@dataclass(frozen=True)
class LineSpan:
    """A piece of an uncompressed line file: bytes [start, stop), both at line starts, after `lines_before` lines."""

    start: int
    stop: int
    lines_before: int


def read_file(
    path: str, fmt: str, bad_records: str, pos: Position, stats: ShardStats, span: LineSpan | None = None
) -> Iterator:
    """Records of one file (or of one `span` of it, see `line_spans`), in order; `pos` always names the
    record last yielded, by its line in the whole file."""
    pos.file, pos.line = path, 0
    if span is not None and fmt not in ("jsonl", "text"):
        raise PlanError(f"{path}: only JSONL and text files can be read in spans, not {fmt}")
    if fmt == "jsonl":
        return _read_jsonl(path, bad_records, pos, stats, span)
    if fmt == "text":
        return _read_text(path, bad_records, pos, stats, span)
    if fmt == "parquet":
        return _read_parquet(path, pos)
    raise PlanError(f"unknown input format {fmt!r}; use 'jsonl', 'text' or 'parquet'")


def read_blocks(
    path: str, fmt: str, bad_records: str, stats: ShardStats, span: LineSpan | None = None
) -> Iterator[tuple[list, Sequence[int]]]:
    """The records `read_file` yields, a block at a time: (records, the line of each record in the
    whole file), for callers that work on whole lists of records rather than one record at a time."""
    if span is not None and fmt not in ("jsonl", "text"):
        raise PlanError(f"{path}: only JSONL and text files can be read in spans, not {fmt}")
    if fmt == "parquet":
        row = 0
        for records in _parquet_groups(path):
            yield records, range(row + 1, row + 1 + len(records))
            row += len(records)
        return
    if fmt == "jsonl":
        decode, error, what = orjson.loads, orjson.JSONDecodeError, "invalid JSON"
    elif fmt == "text":
        decode, error, what = _decode_text, UnicodeDecodeError, "not UTF-8"
    else:
        raise PlanError(f"unknown input format {fmt!r}; use 'jsonl', 'text' or 'parquet'")
    for records, line_before, lines in _record_blocks(path, decode, error, what, bad_records, stats, span):
        yield records, lines if lines is not None else range(line_before + 1, line_before + 1 + len(records))


def _read_jsonl(path: str, bad_records: str, pos: Position, stats: ShardStats, span=None) -> Iterator:
    return _read_lines(
        path, orjson.loads, orjson.JSONDecodeError, "invalid JSON", bad_records, pos, stats, span
    )


def _decode_text(line: bytes) -> str:
    return line.decode("utf-8").removesuffix("\r")


def _read_text(path: str, bad_records: str, pos: Position, stats: ShardStats, span=None) -> Iterator[str]:
    return _read_lines(path, _decode_text, UnicodeDecodeError, "not UTF-8", bad_records, pos, stats, span)


def _read_lines(
    path: str,
    decode,
    decode_error: type[Exception],
    what: str,
    bad_records: str,
    pos: Position,
    stats: ShardStats,
    span: LineSpan | None = None,
) -> Iterator:
    """Records decoded from the file's lines; bad lines are skipped and counted or raise BadRecordError."""
    return chain.from_iterable(
        _decoded_blocks(path, decode, decode_error, what, bad_records, pos, stats, span)
    )


def _decoded_blocks(path, decode, decode_error, what, bad_records, pos, stats, span) -> Iterator[Iterator]:
    for records, line_before, lines in _record_blocks(
        path, decode, decode_error, what, bad_records, stats, span
    ):
        iterator = iter(records)
        pos.start_block(line_before, iterator, len(records), lines)
        yield iterator


def _record_blocks(path, decode, decode_error, what, bad_records, stats, span) -> Iterator[tuple]:
    """(records, line_before, lines) of each block: the records of lines line_before+1.., or of exactly
    `lines` when some were skipped (None otherwise)."""
    # A batch of lines is decoded in one C-level map; only a batch that holds a bad or blank line
    # is decoded again line by line. Records then flow through chain() in C. Batches stay small
    # so that decoded records die young (large batches of live dicts make the GC work hard).
    line_before = span.lines_before if span else 0
    with _open_lines(path, span) as stream:
        for block in _line_blocks(stream):
            for start in range(0, len(block), _DECODE_BATCH):
                batch = block[start : start + _DECODE_BATCH]
                try:
                    records, lines = list(map(decode, batch)), None
                except decode_error:
                    records, lines = _decode_carefully(
                        path, batch, line_before, decode, decode_error, what, bad_records, stats
                    )
                yield records, line_before, lines
                line_before += len(batch)


def _decode_carefully(path, block, line_before, decode, decode_error, what, bad_records, stats):
    records, lines = [], []
    for line_no, line in enumerate(block, line_before + 1):
        try:
            records.append(decode(line))
        except decode_error as e:
            if not line.strip():
                continue  # blank lines separate nothing and carry no record
            if bad_records == "skip":
                stats.skip_bad(path, line_no, str(e))
                continue
            raise BadRecordError(path, line_no, f"{what} ({e}): {line[:80]!r}") from None
        lines.append(line_no)
    return records, lines


@contextmanager
def _open_lines(path: str, span: LineSpan | None) -> Iterator:
    if span is None:
        with open_read(path) as stream:
            yield stream
        return
    with open_file(path, "rb") as raw:
        raw.seek(span.start)
        yield _Limited(raw, span.stop - span.start)


class _Limited:
    """The next `left` bytes of a stream."""

    def __init__(self, raw, left: int):
        self._raw, self._left = raw, left

    def read(self, size: int = -1) -> bytes:
        size = self._left if size < 0 else min(size, self._left)
        data = self._raw.read(size) if size else b""
        self._left -= len(data)
        return data


def line_spans(path: str, span_bytes: int) -> list[LineSpan]:
    """An uncompressed line file cut into spans of about `span_bytes`, each ending after a newline.

    One pass over the file, counting newlines, so each span knows the line number it starts at and
    errors name the line in the whole file. The cuts depend only on the file and `span_bytes`.
    A compressed file cannot be entered in the middle, so it is an error here.
    """
    if span_bytes < 1:
        raise PlanError(f"span_bytes must be at least 1, got {span_bytes}")
    if compression_of(path) is not None:
        raise PlanError(f"{path}: a compressed file cannot be read in spans; read it whole")
    spans: list[LineSpan] = []
    start = lines = lines_at_start = offset = 0
    target = span_bytes
    with open_file(path, "rb") as f:
        for chunk in read_chunks(f):
            base, offset, done = offset, offset + len(chunk), 0
            while target < offset:
                i = chunk.find(b"\n", max(target - base, done))
                if i < 0:
                    break
                lines += chunk.count(b"\n", done, i + 1)
                spans.append(LineSpan(start, base + i + 1, lines_at_start))
                start, lines_at_start, done = base + i + 1, lines, i + 1
                target = start + span_bytes
            lines += chunk.count(b"\n", done)
    if start < offset or not spans:
        spans.append(LineSpan(start, offset, lines_at_start))
    return spans


def _line_blocks(stream) -> Iterator[list[bytes]]:
    """Lists of complete lines (without b'\\n'), read a block (64 KiB) at a time; the last line may lack a newline."""
    rest = b""
    for chunk in read_chunks(stream):
        lines = (rest + chunk).split(b"\n") if rest else chunk.split(b"\n")
        rest = lines.pop()
        yield lines
    if rest:
        yield [rest]


def _read_parquet(path: str, pos: Position) -> Iterator[dict]:
    row = 0
    for records in _parquet_groups(path):
        for record in records:
            row += 1
            pos.line = row
            yield record


def _parquet_groups(path: str) -> Iterator[list[dict]]:
    import pyarrow.parquet as pq

    with open_read(path) as stream:
        parquet = pq.ParquetFile(stream)
        for group in range(parquet.num_row_groups):
            yield parquet.read_row_group(group).to_pylist()
