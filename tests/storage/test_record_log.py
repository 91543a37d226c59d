"""A record log appends on local disk, writes numbered whole parts elsewhere, and reads back either."""

import json
import uuid

import pytest

import storage
from storage.record_log import part_name


@pytest.fixture(params=["local", "memory"])
def log_path(request, tmp_path):
    if request.param == "local":
        return str(tmp_path / "run" / "metrics.jsonl")
    return f"memory://record-log-{uuid.uuid4().hex[:8]}/run/metrics.jsonl"


def test_records_read_back_in_order_after_close(log_path):
    log = storage.RecordLog(log_path)
    for step in range(1, 6):
        log.append({"step": step})
        if step % 2 == 0:
            log.flush()
    log.close()
    assert storage.read_records(log_path) == [{"step": s} for s in range(1, 6)]


def test_local_disk_appends_each_record_at_once_and_a_store_writes_one_part_per_flush(log_path):
    log = storage.RecordLog(log_path)
    log.append({"step": 1})
    directory = storage.parent(log_path)
    if storage.is_local(log_path):
        assert storage.list_names(directory) == ["metrics.jsonl"]
    else:
        assert storage.list_names(directory) == []  # buffered until the flush
        log.flush()
        log.append({"step": 2})
        log.flush()
        log.flush()  # nothing buffered: no empty part
        assert sorted(storage.list_names(directory)) == ["metrics-00000.jsonl", "metrics-00001.jsonl"]
    assert log.read()[0] == {"step": 1}


def test_keep_only_drops_later_records_across_parts_and_numbering_continues(log_path):
    log = storage.RecordLog(log_path)
    for step in range(1, 8):
        log.append({"step": step})
        if step % 3 == 0:
            log.flush()
    log.flush()
    log.keep_only(lambda r: r["step"] <= 4)  # a resume from the checkpoint of step 4
    assert storage.read_records(log_path) == [{"step": s} for s in range(1, 5)]
    again = storage.RecordLog(log_path)  # the resumed process
    again.append({"step": 5})
    again.close()
    assert [r["step"] for r in storage.read_records(log_path)] == [1, 2, 3, 4, 5]
    if not storage.is_local(log_path):
        names = sorted(storage.list_names(storage.parent(log_path)))
        assert names == ["metrics-00000.jsonl", "metrics-00001.jsonl", "metrics-00002.jsonl"]


def test_a_torn_last_line_is_skipped_by_readers_and_dropped_before_the_next_append(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b'{"step": 1}\n{"step": 2}\n{"st')
    assert storage.read_records(str(path)) == [{"step": 1}, {"step": 2}]
    log = storage.RecordLog(str(path))
    log.keep_only(lambda r: r["step"] <= 2)
    log.append({"step": 3})
    assert path.read_text().splitlines() == ['{"step": 1}', '{"step": 2}', '{"step": 3}']


def test_the_reader_reads_parts_in_number_order_then_the_file(tmp_path):
    log = str(tmp_path / "metrics.jsonl")
    for number, step in ((10, 3), (2, 2), (0, 1)):
        (tmp_path / part_name(log, number)).write_text(json.dumps({"step": step}) + "\n")
    (tmp_path / "metrics.jsonl").write_text('{"step": 4}\n')
    (tmp_path / "metrics-x.jsonl").write_text('{"step": 99}\n')  # not a part: ignored
    assert [r["step"] for r in storage.read_records(log)] == [1, 2, 3, 4]
    assert storage.holds_log("metrics.jsonl", ["metrics-00000.jsonl"])
    assert not storage.holds_log("metrics.jsonl", ["metrics-x.jsonl", "other.jsonl"])


def test_the_reader_stops_at_max_bytes(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps({"step": s}) + "\n" for s in range(100)))
    line = len(json.dumps({"step": 0}) + "\n")
    assert len(storage.read_records(str(path), max_bytes=line * 3)) == 3


def test_a_missing_log_reads_as_no_records(tmp_path):
    assert storage.read_records(str(tmp_path / "nothing" / "metrics.jsonl")) == []
