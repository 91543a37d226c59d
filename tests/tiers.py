"""The suite's two tiers, and the guard that keeps the default tier fast (docs/testing.md).

- The default tier is every test not marked `slow`: what `bash scripts/test.sh` (and so CI) runs.
- `--all` adds the slow tier (full sizes and duplicates of paths the default tier already covers);
  `-m slow` runs the slow tier alone, and a test named by its node id runs whatever its marker.
- A default-tier test whose call phase takes longer than `MARIN_TEST_CALL_LIMIT` seconds (60 unless
  set: CI's figure; raise it to debug on a loaded machine) fails, printing its duration: the suite
  cannot creep back past its budget one test at a time. Make it smaller, or mark it slow if what it
  checks is a full size or a duplicate of a faster test. A test that is a chain of process and cluster
  starts a user's path needs (a Ray head, a job, three CLI runs) may carry its own larger budget,
  `@pytest.mark.call_limit(seconds)`; docs/testing.md lists each with its measured time.

Loaded by tests/conftest.py as a plugin (`pytest_plugins`).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

LIMIT_VARIABLE = "MARIN_TEST_CALL_LIMIT"
DEFAULT_LIMIT_S = 60.0


def call_limit_s() -> float:
    """The longest call phase a default-tier test may take, in seconds."""
    value = os.environ.get(LIMIT_VARIABLE, "")
    try:
        return float(value) if value else DEFAULT_LIMIT_S
    except ValueError:
        raise pytest.UsageError(f"{LIMIT_VARIABLE}={value!r}: give a number of seconds") from None


def own_limit_s(item: pytest.Item) -> float:
    """The call limit of `item`: the tier's, or the larger budget its `call_limit(seconds)` marker gives a
    test made of several process and cluster starts (each listed with its reason in docs/testing.md)."""
    marker = item.get_closest_marker("call_limit")
    return max(call_limit_s(), float(marker.args[0])) if marker else call_limit_s()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--all",
        action="store_true",
        dest="all_tiers",
        help="run the slow tier too (tests marked slow: full sizes and duplicates)",
    )


def pytest_configure(config: pytest.Config) -> None:
    call_limit_s()  # a bad value is a usage error before anything runs


def _named_on_command_line(item: pytest.Item, node_ids: list[tuple[Path, str]]) -> bool:
    """Whether `item` is (or is inside) a node id given on the command line, e.g. `file.py::test_x`."""
    if not node_ids:
        return False
    inner = item.nodeid.split("::", 1)[1] if "::" in item.nodeid else ""
    return any(
        item.path == path and (inner == name or inner.startswith((name + "::", name + "[")))
        for path, name in node_ids
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave the slow tier out unless `--all`, a `-m` expression, or a node id asks for it."""
    if config.getoption("all_tiers") or config.option.markexpr:
        return
    node_ids = [
        (Path(config.invocation_params.dir, path).resolve(), name)
        for path, _, name in (arg.partition("::") for arg in config.args)
        if name
    ]
    keep, slow = [], []
    for item in items:
        if item.get_closest_marker("slow") and not _named_on_command_line(item, node_ids):
            slow.append(item)
        else:
            keep.append(item)
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = keep


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if call.when == "call" and report.passed and not item.get_closest_marker("slow"):
        limit = own_limit_s(item)
        if call.duration > limit:
            report.outcome = "failed"
            report.longrepr = (
                f"{item.nodeid} took {call.duration:.1f} s, over the default tier's limit of {limit:g} s "
                f"({LIMIT_VARIABLE}). Make it smaller (docs/testing.md), or mark it slow if it runs a "
                "full size or repeats what a faster test proves."
            )
    return report
