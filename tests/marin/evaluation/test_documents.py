"""Raw evaluation text is read as the data pipeline reads it: same formats, compression, bad-record policy."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import zstandard

from marin.data.file_documents import BadRecordError, ShardStats, read_texts
from marin.evaluation.documents import TextDataset, read_text_dataset
from marin.evaluation.errors import EvalDataError


def _texts(dataset: TextDataset) -> list[str]:
    return [d.text for d in read_text_dataset(dataset)]


def _data_reader(path: Path) -> list[str]:
    return list(read_texts(str(path), "text", "fail", ShardStats()))


def test_a_text_file_is_one_document_per_line_as_in_the_data_reader(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("first note\n\nsecond note\nthird note\n")
    assert _texts(TextDataset("notes", (str(path),))) == ["first note", "second note", "third note"]
    assert _texts(TextDataset("notes", (str(path),))) == _data_reader(path)


def test_compressed_jsonl_reads_the_same_as_plain_with_domains(tmp_path):
    records = [{"text": "a cat", "tag": "pets"}, {"text": "a dog"}, {"text": "rain", "tag": "weather"}]
    lines = "".join(json.dumps(r) + "\n" for r in records).encode()
    (tmp_path / "d.jsonl").write_bytes(lines)
    (tmp_path / "d.jsonl.gz").write_bytes(gzip.compress(lines))
    (tmp_path / "d.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(lines))
    for name in ("d.jsonl", "d.jsonl.gz", "d.jsonl.zst"):
        docs = read_text_dataset(TextDataset("ds", (str(tmp_path / name),), domain_field="tag"))
        assert [(d.text, d.domain, d.num_bytes) for d in docs] == [
            ("a cat", "ds/pets", 5),
            ("a dog", "ds", 5),
            ("rain", "ds/weather", 4),
        ]
        assert [d.text for d in docs] == _data_reader(tmp_path / name)


def test_bad_records_fail_naming_the_line_or_are_skipped_when_asked(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"text": "good"}\n{not json\n{"body": "no text"}\n{"text": "also good"}\n')
    with pytest.raises(BadRecordError, match=r"d\.jsonl:2"):
        read_text_dataset(TextDataset("ds", (str(path),)))
    assert _texts(TextDataset("ds", (str(path),), bad_records="skip")) == ["good", "also good"]


def test_a_dataset_is_checked_when_declared(tmp_path):
    with pytest.raises(EvalDataError, match="bad_records"):
        TextDataset("ds", ("d.jsonl",), bad_records="ignore")
    with pytest.raises(EvalDataError, match="'ds'.*d.csv"):
        TextDataset("ds", ("d.csv",))
