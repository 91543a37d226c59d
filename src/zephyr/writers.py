"""Writers: one output file per shard, `part-00000-of-00008.<ext>`, written atomically.

JSONL and text are written in batches of encoded lines; Parquet in row groups of
`row_group_size` rows with the schema of the first group. The same records give the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice

import orjson

from storage import join, open_write, read_bytes, write_bytes
from zephyr.errors import PlanError
from zephyr.readers import ShardStats

WRITE_FORMATS = {"jsonl": "jsonl", "text": "txt", "parquet": "parquet"}
COMPRESSION_EXTENSIONS = {None: "", "gzip": ".gz", "gz": ".gz", "zstd": ".zst", "zst": ".zst"}
_BATCH = 256


@dataclass(frozen=True)
class WriteSpec:
    """Where and how the last stage writes: format, output directory, compression, Parquet row group size."""

    format: str
    output_dir: str
    compression: str | None = None
    row_group_size: int = 65536
    part_stats: bool = False  # beside each part, its counts (see `PartStats`); set for skip_existing writes

    def __post_init__(self) -> None:
        if self.format not in WRITE_FORMATS:
            raise PlanError(f"unknown output format {self.format!r}; use one of {sorted(WRITE_FORMATS)}")
        if self.compression not in COMPRESSION_EXTENSIONS:
            raise PlanError(f"unknown compression {self.compression!r}; use None, 'gzip' or 'zstd'")
        if self.format == "parquet" and self.compression is not None:
            raise PlanError("Parquet compresses its own pages; write_parquet takes no compression")

    @property
    def extension(self) -> str:
        return WRITE_FORMATS[self.format] + COMPRESSION_EXTENSIONS[self.compression]

    def path_for(self, shard: int, num_shards: int) -> str:
        """The output file of one shard."""
        return join(self.output_dir, f"part-{shard:05d}-of-{num_shards:05d}.{self.extension}")

    def describe(self) -> str:
        return f"write {self.extension} to {join(self.output_dir, 'part-NNNNN-of-NNNNN.' + self.extension)}"


@dataclass(frozen=True)
class PartStats:
    """The counts of one part file, kept beside it (`part_stats_path`) when the spec asks: a write
    resumed with skip_existing keeps the part, and these give its records and the malformed input
    records its shard skipped, which no reading of the part could recover."""

    records: int
    bad_records: int


def part_stats_path(path: str) -> str:
    """Where the counts of the part file `path` are kept: a hidden name beside it."""
    directory, _, name = path.rstrip("/").rpartition("/")
    return join(directory or ".", f".{name}.stats")


def read_part_stats(path: str) -> PartStats | None:
    """The counts kept beside the part file `path`, or None when there are none (or they are garbled)."""
    data = read_bytes(part_stats_path(path))
    try:
        fields = orjson.loads(data) if data else None
        return PartStats(int(fields["records"]), int(fields["bad_records"])) if fields else None
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


def write_shard(spec: WriteSpec, path: str, records: Iterable, stats: ShardStats | None = None) -> int:
    """Write the records to `path` atomically in the spec's format; return how many were written.

    With `spec.part_stats`, the part's counts (records written, `stats.bad_records`) are written
    beside it before the part appears, so a part never lacks its counts.
    """
    with open_write(path) as stream:
        if spec.format == "jsonl":
            count = _write_jsonl(stream, records)
        elif spec.format == "text":
            count = _write_lines(stream, _text_lines(records))
        else:
            count = _write_parquet(stream, records, spec.row_group_size)
        if spec.part_stats:
            bad = stats.bad_records if stats is not None else 0
            write_bytes(part_stats_path(path), orjson.dumps({"records": count, "bad_records": bad}))
    return count


def _write_lines(stream, lines: Iterator[bytes], newline: bytes = b"") -> int:
    """Write encoded lines a batch at a time, each batch joined by `newline` and ended with it (empty
    when the lines carry their own); the loop over records stays inside C (islice, map, join)."""
    count = 0
    write = stream.write
    while batch := list(islice(lines, _BATCH)):
        write(newline.join(batch))
        if newline:
            write(newline)
        count += len(batch)
    return count


def _write_jsonl(stream, records: Iterable) -> int:
    """JSON lines with `orjson.dumps` mapped in C with no keyword argument: a partial holding
    `option=` builds a keyword dict per record (~200 ns, a tenth of a read -> map -> write pass)."""
    return _write_lines(stream, map(orjson.dumps, records), newline=b"\n")


def _text_lines(records: Iterable) -> Iterator[bytes]:
    for record in records:
        if not isinstance(record, str):
            raise PlanError(
                f"write_text writes str records, got {type(record).__name__}: {record!r:.80}; map to str first"
            )
        yield record.encode("utf-8") + b"\n"


def _write_parquet(stream, records: Iterable, row_group_size: int) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    records = iter(records)
    count = 0
    writer = None
    schema = None
    try:
        while batch := list(islice(records, row_group_size)):
            table = pa.Table.from_pylist(batch, schema=schema)
            if writer is None:
                schema = table.schema
                writer = pq.ParquetWriter(stream, schema)
            writer.write_table(table, row_group_size=row_group_size)
            count += len(batch)
        if writer is None:  # an empty shard still gets a valid, empty file
            writer = pq.ParquetWriter(stream, pa.schema([]))
    finally:
        if writer is not None:
            writer.close()
    return count
