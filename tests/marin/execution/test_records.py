"""Records are read only from regular files of at most 16 MiB: a FIFO, a device or a huge file gives a
clear error naming the path, never a hang or an exhausted memory."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from marin.execution.artifact import read_info
from marin.execution.errors import UnreadableRecordError
from marin.execution.lease import try_acquire
from marin.execution.records import MAX_RECORD_BYTES, read_record, read_record_json
from marin.execution.status import read_status


def test_a_fifo_record_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / ".executor_status"
    os.mkfifo(fifo)
    with pytest.raises(UnreadableRecordError) as err:
        read_record(str(fifo))
    assert str(fifo) in str(err.value) and "FIFO" in str(err.value)
    assert read_status(str(tmp_path)) is None
    with pytest.raises(UnreadableRecordError):
        read_status(str(tmp_path), strict=True)


def test_a_device_behind_a_record_name_is_refused(tmp_path):
    with pytest.raises(UnreadableRecordError) as err:
        read_record("/dev/zero")
    assert "/dev/zero" in str(err.value) and "device" in str(err.value)
    os.symlink("/dev/zero", tmp_path / ".executor_info")
    with pytest.raises(UnreadableRecordError) as err:
        read_record(str(tmp_path / ".executor_info"))
    assert "symlink" in str(err.value)
    assert read_info(str(tmp_path)) is None


def test_a_record_past_the_size_cap_is_refused_naming_its_size(tmp_path):
    big = tmp_path / ".artifact.json"
    with open(big, "wb") as f:
        f.truncate(MAX_RECORD_BYTES + 1)
    with pytest.raises(UnreadableRecordError) as err:
        read_record(str(big))
    assert str(big) in str(err.value) and str(MAX_RECORD_BYTES + 1) in str(err.value)


def test_a_small_regular_record_reads_whole(tmp_path):
    record = tmp_path / ".executor_info"
    record.write_bytes(json.dumps({"name": "x", "blob": "y" * 200_000}).encode())
    assert read_record_json(str(record))["blob"] == "y" * 200_000
    assert read_record(str(tmp_path / "missing")) is None
    (tmp_path / "empty").write_bytes(b"")
    with pytest.raises(UnreadableRecordError) as err:
        read_record_json(str(tmp_path / "empty"), strict=True)
    assert "empty" in str(err.value)


def test_a_fifo_lease_file_counts_as_an_unknown_holder_not_a_hang(tmp_path):
    os.mkfifo(tmp_path / ".executor_lease.0")
    holder = try_acquire(str(tmp_path), "s", timeout=60)
    assert holder.host == "?"  # honoured until its mtime is a timeout old


def test_marin_status_lists_a_fifo_status_as_unreadable_instead_of_hanging(tmp_path):
    out = tmp_path / "prefix" / "step-abc"
    out.mkdir(parents=True)
    os.mkfifo(out / ".executor_status")
    done = subprocess.run(
        [sys.executable, "-m", "marin.cli", "status", str(tmp_path / "prefix"), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [(Path(r["path"]).name, r["state"]) for r in rows] == [("step-abc", "UNREADABLE")]
    assert "FIFO" in rows[0]["detail"]
