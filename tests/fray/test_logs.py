"""Task logs: the last lines of a local or fsspec log (empty when there is none yet), and remote logs
that keep every attempt."""

from __future__ import annotations

import fsspec

from fray.cluster.logs import local_log_file, tail


def test_tail_of_a_local_log_keeps_its_last_lines_within_the_byte_limit(tmp_path):
    log = tmp_path / "task.log"
    log.write_text("".join(f"line {i}\n" for i in range(10_000)))
    assert tail(str(log), lines=3) == "line 9997\nline 9998\nline 9999"
    assert tail(f"file://{log}", lines=2) == "line 9998\nline 9999"
    assert tail(str(log), lines=100, max_bytes=25).splitlines() == ["9997", "line 9998", "line 9999"]


def test_tail_of_a_missing_log_is_empty_locally_and_on_fsspec(tmp_path):
    assert tail(str(tmp_path / "never-written.log")) == ""
    assert tail(None) == ""
    assert tail("memory://fray-test-logs/never-written.log") == ""


def test_tail_of_an_fsspec_log(tmp_path):
    with fsspec.open("memory://fray-test-logs/task.log", "wb") as f:
        f.write(b"first\nsecond\nthird\n")
    assert tail("memory://fray-test-logs/task.log", lines=2) == "second\nthird"


def test_a_remote_log_keeps_every_attempt_and_a_new_one_is_written_whole():
    path = "memory://fray-test-logs/attempts.log"
    with local_log_file(path) as local, open(local, "ab") as f:  # the first attempt: created whole
        f.write(b"attempt 1\n")
    with local_log_file(path) as local, open(local, "ab") as f:  # a retry: appends to what is there
        f.write(b"attempt 2\n")
    assert tail(path) == "attempt 1\nattempt 2"
