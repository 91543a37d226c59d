"""Readers and writers on real files: compression round trips, Parquet row groups, bad records,
atomic part files and resuming with skip_existing."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
import zstandard

from zephyr import BadRecordError, Dataset, ShardFailedError
from jsonl_files import read_jsonl_dir, write_jsonl

SYNC = {"backend": "sync", "quiet": True}
RECORDS = [{"id": i, "text": f"line {i} é", "score": i / 7} for i in range(40)]


@pytest.mark.parametrize("compression,ext", [("gzip", "jsonl.gz"), ("zstd", "jsonl.zst"), (None, "jsonl")])
def test_jsonl_round_trips_through_compression(tmp_path: Path, compression, ext):
    out = tmp_path / "out"
    result = Dataset.from_list(RECORDS, num_shards=2).write_jsonl(str(out), compression=compression, **SYNC)
    assert [Path(p).name for p in result.paths] == [f"part-00000-of-00002.{ext}", f"part-00001-of-00002.{ext}"]
    assert result.records_written == len(RECORDS)
    raw = Path(result.paths[0]).read_bytes()
    if compression == "gzip":
        assert gzip.decompress(raw).startswith(orjson.dumps(RECORDS[0]))
    elif compression == "zstd":
        assert zstandard.ZstdDecompressor().decompressobj().decompress(raw).startswith(orjson.dumps(RECORDS[0]))
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
    result = Dataset.from_list(lines, num_shards=3).write_text(str(tmp_path / "t"), compression="gzip", **SYNC)
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
    assert sorted(p.name for p in out.iterdir()) == [Path(p).name for p in first.paths]


def test_reading_is_independent_of_chunk_boundaries(tmp_path: Path):
    long_records = [{"id": i, "text": "x" * (300_000 + i)} for i in range(8)]  # lines straddle 1 MiB reads
    write_jsonl(tmp_path / "big.jsonl", long_records)
    assert Dataset.from_files(str(tmp_path / "big.jsonl")).map(lambda r: len(r["text"])).collect(**SYNC) == [
        300_000 + i for i in range(8)
    ]
