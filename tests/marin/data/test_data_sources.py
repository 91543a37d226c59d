"""Document sources: file formats, malformed records, exact sample_count, the embedded corpus."""

from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from marin.data.corpus import story
from marin.data.file_documents import BadRecordError, ShardStats
from marin.data.sources import EMBEDDED_SOURCE, SourceConfig, SourceError, iter_documents

TEXTS = ["first document", "second one\nwith a newline", "Café 🙂 third"]


def _jsonl(records) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def _documents(config: SourceConfig) -> tuple[list[str], ShardStats]:
    stats = ShardStats()
    return list(iter_documents(config.plan(), config.bad_records, stats)), stats


@pytest.mark.parametrize("name", ["docs.jsonl", "docs.jsonl.gz", "docs.jsonl.zst", "docs.parquet"])
def test_record_files_yield_their_text_field_in_order(tmp_path, name):
    path = tmp_path / name
    records = [{"body": t, "id": i} for i, t in enumerate(TEXTS)]
    if name.endswith(".parquet"):
        pq.write_table(pa.Table.from_pylist(records), path)
    elif name.endswith(".gz"):
        path.write_bytes(gzip.compress(_jsonl(records)))
    elif name.endswith(".zst"):
        path.write_bytes(zstandard.ZstdCompressor().compress(_jsonl(records)))
    else:
        path.write_bytes(_jsonl(records))
    docs, stats = _documents(SourceConfig(paths=(str(path),), text_key="body"))
    assert docs == TEXTS and stats.bad_records == 0


def test_text_files_are_one_document_per_line_and_globs_expand_sorted(tmp_path):
    (tmp_path / "b.txt").write_text("line three\n\nline four\n")
    (tmp_path / "a.txt").write_text("line one\nline two\n")
    docs, _ = _documents(SourceConfig(paths=(str(tmp_path / "*.txt"),)))
    assert docs == ["line one", "line two", "line three", "line four"]


def test_malformed_line_fails_with_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"text": "ok"}\n{"text": "also ok"}\n{not json\n{"text": "fine"}\n')
    with pytest.raises(BadRecordError) as err:
        _documents(SourceConfig(paths=(str(path),)))
    assert f"{path}:3" in str(err.value) and "bad_records='skip'" in str(err.value)


def test_missing_or_non_string_text_field_names_file_and_line(tmp_path):
    path = tmp_path / "fields.jsonl"
    path.write_text('{"text": "ok"}\n{"content": "wrong key"}\n')
    with pytest.raises(BadRecordError, match=rf"{path}:2.*no 'text' field"):
        _documents(SourceConfig(paths=(str(path),)))
    path.write_text('{"text": "ok"}\n{"text": 5}\n')
    with pytest.raises(BadRecordError, match=rf"{path}:2.*not a string"):
        _documents(SourceConfig(paths=(str(path),)))


def test_skip_policy_skips_and_counts_malformed_records(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text('{"text": "a"}\n{broken\n{"text": "b"}\n{"other": 1}\n{"text": null}\n{"text": "c"}\n')
    docs, stats = _documents(SourceConfig(paths=(str(path),), bad_records="skip"))
    assert docs == ["a", "b", "c"]
    assert stats.bad_records == 3
    assert stats.bad_examples[0].startswith(f"{path}:2")


@pytest.mark.parametrize("count", [1, 9, 10, 11, 25])
def test_sample_count_is_exact_across_files(tmp_path, count):
    for f in range(3):
        (tmp_path / f"part{f}.jsonl").write_bytes(_jsonl([{"text": f"f{f} d{d}"} for d in range(10)]))
    docs, _ = _documents(SourceConfig(paths=(str(tmp_path / "*.jsonl"),), sample_count=count))
    expected = [f"f{f} d{d}" for f in range(3) for d in range(10)][:count]
    assert docs == expected


def test_sample_count_larger_than_the_source_is_an_error(tmp_path):
    (tmp_path / "few.jsonl").write_bytes(_jsonl([{"text": "x"}] * 3))
    with pytest.raises(SourceError, match="only 3 documents"):
        SourceConfig(paths=(str(tmp_path / "few.jsonl"),), sample_count=4).plan()


def test_sample_count_skips_malformed_records_and_stays_exact(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"text": "a"}\n{oops\n{"text": "b"}\n{"text": "c"}\n')
    docs, stats = _documents(SourceConfig(paths=(str(path),), sample_count=2, bad_records="skip"))
    assert docs == ["a", "b"] and stats.bad_records == 1


def test_embedded_source_reads_the_story_corpus_in_order():
    docs, _ = _documents(SourceConfig(source=EMBEDDED_SOURCE, sample_count=7_000))
    assert len(docs) == 7_000
    assert docs[0] == story(0) and docs[6_999] == story(6_999)


def test_declaration_errors_are_clear():
    with pytest.raises(SourceError, match="exactly one of"):
        SourceConfig().check()
    with pytest.raises(SourceError, match="wrap it in a list"):
        SourceConfig(paths="a.jsonl").check()
    with pytest.raises(SourceError, match="unknown embedded source"):
        SourceConfig(source="marin://nope").check()
    with pytest.raises(SourceError, match="bad_records"):
        SourceConfig(source=EMBEDDED_SOURCE, bad_records="ignore").check()
