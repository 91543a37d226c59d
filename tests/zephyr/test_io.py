"""Readers and writers on real files: compression round trips, Parquet row groups, bad records,
atomic part files and resuming with skip_existing."""

from __future__ import annotations

import gzip
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
import zstandard
from jsonl_files import read_jsonl_dir, write_jsonl

from zephyr import BadRecordError, Dataset, ShardFailedError

SYNC = {"backend": "sync", "quiet": True}
RECORDS = [{"id": i, "text": f"line {i} é", "score": i / 7} for i in range(40)]


@pytest.mark.parametrize("compression,ext", [("gzip", "jsonl.gz"), ("zstd", "jsonl.zst"), (None, "jsonl")])
def test_jsonl_round_trips_through_compression(tmp_path: Path, compression, ext):
    out = tmp_path / "out"
    result = Dataset.from_list(RECORDS, num_shards=2).write_jsonl(str(out), compression=compression, **SYNC)
    assert [Path(p).name for p in result.paths] == [
        f"part-00000-of-00002.{ext}",
        f"part-00001-of-00002.{ext}",
    ]
    assert result.records_written == len(RECORDS)
    raw = Path(result.paths[0]).read_bytes()
    if compression == "gzip":
        assert gzip.decompress(raw).startswith(orjson.dumps(RECORDS[0]))
    elif compression == "zstd":
        assert (
            zstandard.ZstdDecompressor().decompressobj().decompress(raw).startswith(orjson.dumps(RECORDS[0]))
        )
    back = Dataset.from_files(str(out / f"*.{ext}")).collect(**SYNC)
    assert back == RECORDS


def test_compressed_outputs_are_byte_identical_across_runs(tmp_path: Path):
    ds = Dataset.from_list(RECORDS, num_shards=3).map(lambda r: {**r, "n": len(r["text"])})
    first = ds.write_jsonl(str(tmp_path / "a"), compression="gzip", **SYNC)
    second = ds.write_jsonl(str(tmp_path / "b"), compression="gzip", **SYNC)
    assert [Path(p).read_bytes() for p in first.paths] == [Path(p).read_bytes() for p in second.paths]


def test_parquet_round_trips_in_row_groups(tmp_path: Path):
    out = tmp_path / "pq"
    result = Dataset.from_list(RECORDS, num_shards=2).write_parquet(str(out), row_group_size=8, **SYNC)
    metadata = pq.ParquetFile(result.paths[0]).metadata
    assert metadata.num_rows == 20 and metadata.num_row_groups == 3
    assert Dataset.from_files(str(out / "*.parquet")).collect(**SYNC) == RECORDS


def test_text_round_trips_with_gzip(tmp_path: Path):
    lines = [f"sentence number {i}" for i in range(30)]
    result = Dataset.from_list(lines, num_shards=3).write_text(
        str(tmp_path / "t"), compression="gzip", **SYNC
    )
    assert Path(result.paths[0]).name == "part-00000-of-00003.txt.gz"
    assert Dataset.from_files(str(tmp_path / "t" / "*.txt.gz")).collect(**SYNC) == lines


def _malformed_input(tmp_path: Path) -> Path:
    path = tmp_path / "in" / "mixed.jsonl"
    path.parent.mkdir()
    path.write_bytes(b'{"id": 1}\n{"id": 2}\n{"id": 3, broken\n\n{"id": 4}\nnot json at all\n{"id": 5}')
    return path


def test_malformed_jsonl_fails_by_default_naming_file_and_line(tmp_path: Path):
    path = _malformed_input(tmp_path)
    with pytest.raises(ShardFailedError) as info:
        Dataset.from_files(str(path)).write_jsonl(str(tmp_path / "out"), **SYNC)
    err = info.value
    assert err.error_type == BadRecordError.__name__
    assert (err.file, err.line, err.attempts) == (str(path), 3, 1)  # a parse error is not retried
    assert f"{path}:3" in str(err)
    assert not list(tmp_path.glob("out/*"))  # no part file, and no temporary file left behind


def test_malformed_jsonl_is_skipped_and_counted_under_skip_policy(tmp_path: Path, caplog):
    path = _malformed_input(tmp_path)
    result = Dataset.from_files(str(path), bad_records="skip").write_jsonl(str(tmp_path / "out"), **SYNC)
    assert read_jsonl_dir(tmp_path / "out") == [{"id": i} for i in (1, 2, 4, 5)]
    assert result.bad_records == 2 and result.records_written == 4
    assert [e.split(": ")[0] for e in result.bad_examples] == [f"{path}:3", f"{path}:6"]
    assert "skipped 2 malformed record(s)" in caplog.text


def test_skip_existing_writes_only_the_missing_parts(tmp_path: Path):
    out = tmp_path / "out"
    ds = Dataset.from_list(RECORDS, num_shards=4)
    first = ds.write_jsonl(str(out), **SYNC)
    Path(first.paths[1]).unlink()
    Path(first.paths[2]).write_bytes(b'{"kept": true}\n')  # a finished part is left as it is
    resumed = ds.write_jsonl(str(out), skip_existing=True, **SYNC)
    assert resumed.shards_skipped == 3 and resumed.records_written == 10
    assert Path(first.paths[1]).exists()
    assert Path(first.paths[2]).read_bytes() == b'{"kept": true}\n'
    assert sorted(p.name for p in out.glob("part-*")) == [Path(p).name for p in first.paths]


def test_a_resumable_write_keeps_each_parts_counts_beside_it(tmp_path: Path):
    from zephyr.io import PartStats, read_part_stats

    lines = "".join(f'{{"id": {i}}}\n' if i % 3 else "{broken\n" for i in range(9))
    (tmp_path / "in.jsonl").write_text(lines)
    ds = Dataset.from_files(str(tmp_path / "in.jsonl"), bad_records="skip")
    plain = ds.write_jsonl(str(tmp_path / "plain"), **SYNC)
    assert read_part_stats(plain.paths[0]) is None  # only a skip_existing write keeps them
    resumable = ds.write_jsonl(str(tmp_path / "resumable"), skip_existing=True, **SYNC)
    assert read_part_stats(resumable.paths[0]) == PartStats(records=6, bad_records=3)
    assert [p.name for p in (tmp_path / "resumable").iterdir() if p.name.startswith(".")] == [
        f".{Path(resumable.paths[0]).name}.stats"
    ]


def test_reading_is_independent_of_chunk_boundaries(tmp_path: Path):
    long_records = [{"id": i, "text": "x" * (300_000 + i)} for i in range(8)]  # lines straddle 1 MiB reads
    write_jsonl(tmp_path / "big.jsonl", long_records)
    assert Dataset.from_files(str(tmp_path / "big.jsonl")).map(lambda r: len(r["text"])).collect(**SYNC) == [
        300_000 + i for i in range(8)
    ]


def _ledger_parquet_files(directory: Path) -> list[dict]:
    """Two Parquet files with timestamp, date, decimal and float columns; rows repeat across files."""
    import pyarrow as pa

    schema = pa.schema(
        [
            ("ts", pa.timestamp("us", tz="UTC")),
            ("day", pa.date32()),
            ("amount", pa.decimal128(10, 2)),
            ("score", pa.float64()),
        ]
    )
    rows = [
        {
            "ts": datetime(2024, 1, 1 + i % 3, 12, 0, i % 2, tzinfo=UTC),
            "day": date(2024, 1, 1 + i % 3),
            "amount": Decimal(f"{i % 4}.{i % 3}0"),
            "score": [2.0, 2.5, -0.0, 1e20][i % 4],
        }
        for i in range(24)
    ]
    directory.mkdir()
    for f, part in enumerate((rows[:12], rows[12:])):
        table = pa.Table.from_pylist(part, schema=schema)
        pq.write_table(table, directory / f"ledger-{f}.parquet", row_group_size=5)
    return rows


def sum_amounts(ts, records) -> dict:
    records = list(records)
    return {"ts": ts, "total": sum(r["amount"] for r in records), "n": len(records)}


def count_score(score, records) -> dict:
    return {"score": score, "n": sum(1 for _ in records)}


def test_parquet_timestamps_and_decimals_deduplicate_and_group_keeping_their_types(tmp_path: Path):
    rows = _ledger_parquet_files(tmp_path / "in")
    source = Dataset.from_files(str(tmp_path / "in" / "*.parquet"))

    distinct = source.deduplicate(num_shards=3).collect(**SYNC)  # the whole record is the key
    expected: list[dict] = []
    for row in rows:
        if row not in expected:
            expected.append(row)
    assert sorted(distinct, key=repr) == sorted(expected, key=repr) and len(distinct) < len(rows)

    by_ts_dir = str(tmp_path / "by_ts")
    totals = source.group_by(lambda r: r["ts"], sum_amounts, num_shards=3).write_parquet(by_ts_dir, **SYNC)
    tables = [pq.read_table(p) for p in totals.paths]
    assert {str(t.schema.field("ts").type) for t in tables} == {"timestamp[us, tz=UTC]"}
    assert {str(t.schema.field("total").type) for t in tables if t.num_rows} <= {"decimal128(3, 2)"}
    by_ts = {r["ts"]: r for t in tables for r in t.to_pylist()}
    for ts in {row["ts"] for row in rows}:
        group = [row for row in rows if row["ts"] == ts]
        assert by_ts[ts]["n"] == len(group) and by_ts[ts]["total"] == sum(row["amount"] for row in group)

    # 2.0 and -0.0 group with their int twins inside zephyr, yet reach the reducer as floats, so
    # every part file's score column is double (an int key would make some shards int64).
    by_score_dir = str(tmp_path / "by_score")
    counts = source.group_by(lambda r: r["score"], count_score, num_shards=4).write_parquet(
        by_score_dir, **SYNC
    )
    tables = [pq.read_table(p) for p in counts.paths]
    assert {str(t.schema.field("score").type) for t in tables if t.num_rows} == {"double"}
    counts_by_score = sorted((r["score"], r["n"]) for t in tables for r in t.to_pylist())
    assert counts_by_score == [(-0.0, 6), (2.0, 6), (2.5, 6), (1e20, 6)]


@pytest.mark.parametrize("span_bytes", [1, 7, 50, 333, 10_000])
def test_line_spans_read_every_record_once_numbered_by_their_line_in_the_whole_file(tmp_path, span_bytes):
    from zephyr.io import Position, ShardStats, line_spans, read_blocks, read_file

    path = tmp_path / "docs.jsonl"
    lines = [orjson.dumps({"id": i, "text": "x" * (i % 13)}).decode() for i in range(60)]
    lines[17] = ""  # a blank line still counts as a line
    lines[41] = "{not json"
    path.write_text("\n".join(lines) + "\n")
    spans = line_spans(str(path), span_bytes)
    assert spans[0].start == 0 and spans[-1].stop == path.stat().st_size
    assert all(a.stop == b.start for a, b in zip(spans, spans[1:], strict=False))
    assert (len(spans) == 1) == (span_bytes == 10_000)  # the file is about 1,300 bytes
    got, stats = [], ShardStats()
    for span in spans:
        pos = Position()
        for record in read_file(str(path), "jsonl", "skip", pos, stats, span):
            got.append((pos.line, record["id"]))
    assert got == [(i + 1, i) for i in range(60) if i not in (17, 41)]
    blocks = [
        (line, record["id"])
        for span in spans
        for records, found in read_blocks(str(path), "jsonl", "skip", ShardStats(), span)
        for line, record in zip(found, records, strict=True)
    ]
    assert blocks == got  # the same records and lines, a block at a time
    assert stats.bad_records == 1 and stats.bad_examples[0].startswith(f"{path}:42: ")
    with pytest.raises(BadRecordError, match=r"docs.jsonl:42"):
        for span in spans:
            list(read_file(str(path), "jsonl", "fail", Position(), ShardStats(), span))


def test_line_spans_refuse_a_compressed_file(tmp_path):
    from zephyr.errors import PlanError
    from zephyr.io import line_spans

    path = tmp_path / "docs.jsonl.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(b'{"a": 1}\n'))
    with pytest.raises(PlanError, match="compressed file cannot be read in spans"):
        line_spans(str(path), 4)
