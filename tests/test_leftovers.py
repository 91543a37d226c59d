"""The session-end check (tests/leftovers.py): a process a test started and left running fails the
run, is named, and is killed."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest
from leftovers import GRACE_ENV

TESTS = """
import subprocess

def test_leaves_a_daemon_behind():
    proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
    open("pid", "w").write(str(proc.pid))

def test_cleans_up_after_itself():
    proc = subprocess.Popen(["sleep", "600"])
    proc.kill()
    proc.wait()
"""


@pytest.fixture
def pytester(pytester, monkeypatch):
    monkeypatch.setenv(
        "PYTHONPATH", str(Path(__file__).parent)
    )  # leftovers.py, in the inner pytest's process
    monkeypatch.setenv(GRACE_ENV, "1")  # its daemon never ends: no need to wait the suite's 20 s for it
    return pytester


def test_a_process_left_running_fails_the_suite_is_named_and_is_killed(pytester):
    pytester.makeini("[pytest]\naddopts = -p leftovers\n")
    pytester.makepyfile(test_sample=TESTS)
    result = pytester.runpytest_subprocess()
    pid = int((pytester.path / "pid").read_text())
    assert result.ret == 1
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*processes the tests left running*", f"*pid {pid}: sleep 600*"])
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_a_suite_that_stops_what_it_starts_passes(pytester):
    pytester.makeini("[pytest]\naddopts = -p leftovers\n")
    pytester.makepyfile(test_sample="def test_nothing():\n    pass\n")
    assert pytester.runpytest_subprocess().ret == 0
