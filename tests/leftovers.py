"""Nothing the tests start outlives the suite: a check at the session's end fails the run if any
process the tests started is still alive, names each one, and kills it.

A process is the tests' when its environment carries this session's mark (`SESSION_MARK`, set before
anything starts and inherited by every child, pytest-xdist's workers included) or its command line
names the session's temporary folder (a command run in an environment built from scratch, as the
README Ray test's `ray start` is). Ray daemons re-parent themselves to init, so they are no
descendants of pytest: only such marks find them. The warm worker processes of the pytest process
itself end with it (they watch their parent) and are not counted.

Loaded by tests/conftest.py as a plugin (`pytest_plugins`).
"""

from __future__ import annotations

import os
import time
import uuid

import psutil
import pytest
from processes import kill_all

SESSION_MARK = "PYTEST_MARIN_SESSION"  # not MARIN_*: tests/shell_env.fresh_env keeps it
# How long the check waits for the tests' processes to end (the workers of a pytest-xdist worker that
# has just exited notice it within seconds); tests/test_leftovers.py's inner suite, whose daemon never
# ends, waits less.
GRACE_ENV = "MARIN_TEST_LEFTOVERS_GRACE_S"


def _is_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    if _is_controller(config):
        os.environ[SESSION_MARK] = uuid.uuid4().hex
        config.stash[_started] = time.time()


_started = pytest.StashKey[float]()
_found = pytest.StashKey[list[str]]()


def _mine(proc: psutil.Process, mark: str, basetemp: str) -> bool:
    try:
        if basetemp and basetemp in " ".join(proc.cmdline()):
            return True
        return proc.environ().get(SESSION_MARK) == mark
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False


def _ends_with_us(proc: psutil.Process) -> bool:
    """A warm worker of this process (fray's LocalCluster, zephyr's process backend): it exits when we do."""
    try:
        return proc.ppid() == os.getpid() and "exit_when_parent_dies" in " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return True


def leftover_processes(mark: str, since: float, basetemp: str) -> list[psutil.Process]:
    """The processes still alive that this session's tests started (see the module docstring)."""
    me = psutil.Process()
    exempt = {me.pid, *(p.pid for p in me.parents())}
    found = []
    for proc in psutil.process_iter(["create_time"]):
        if proc.pid in exempt or (proc.info["create_time"] or 0) < since - 1:
            continue
        if _mine(proc, mark, basetemp) and not _ends_with_us(proc):
            found.append(proc)
    return found


def _describe(proc: psutil.Process) -> str:
    try:
        return f"pid {proc.pid}: {' '.join(proc.cmdline())[:300]}"
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return f"pid {proc.pid}"


@pytest.hookimpl(trylast=True)  # after pytest-xdist has stopped its workers
def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if not _is_controller(config) or _started not in config.stash:
        return
    basetemp = (
        str(config._tmp_path_factory.getbasetemp()) + os.sep if hasattr(config, "_tmp_path_factory") else ""
    )
    mark, since = os.environ[SESSION_MARK], config.stash[_started]
    deadline = time.monotonic() + float(os.environ.get(GRACE_ENV, "20"))
    while (left := leftover_processes(mark, since, basetemp)) and time.monotonic() < deadline:
        time.sleep(0.5)
    if not left:
        return
    config.stash[_found] = [_describe(p) for p in left]
    kill_all(left)
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    found = config.stash.get(_found, [])
    if found:
        terminalreporter.section("processes the tests left running", sep="=", red=True, bold=True)
        terminalreporter.line(
            "These outlived the suite (killed now). Stop what a test starts in its own teardown:"
        )
        for line in found:
            terminalreporter.line(f"  {line}")
