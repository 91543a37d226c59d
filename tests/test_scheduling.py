"""Scheduling (tests/scheduling.py): the users of a shared session fixture run together, first, in
its xdist group, and the fixture is torn down right after its last user."""

from __future__ import annotations

import os

CONFTEST = """
import pytest

@pytest.fixture(scope="session")
def ray_nodes():
    print("\\nEVENT up")
    yield
    print("\\nEVENT down")
"""

TESTS = """
import pytest

def test_a_plain_one():
    print("\\nEVENT plain")

def test_first_user(ray_nodes):
    print("\\nEVENT user")

@pytest.mark.xdist_group("other")
def test_in_its_own_group():
    print("\\nEVENT grouped")

def test_second_user(ray_nodes):
    print("\\nEVENT user")
"""


def test_shared_fixture_users_run_first_together_and_the_fixture_stops_after_the_last(pytester):
    pytester.makeini(
        "[pytest]\naddopts = -p scheduling --strict-markers\nmarkers = xdist_group(name): a group\n"
    )
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_sample=TESTS)
    result = pytester.runpytest("-s")
    result.assert_outcomes(passed=4)
    events = [line.split()[1] for line in result.outlines if line.startswith("EVENT")]
    assert events == ["up", "user", "user", "down", "grouped", "plain"]


GROUPS_REPORT = """
import pytest

@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    for item in items:
        mark = item.get_closest_marker("xdist_group")
        print("GROUP", item.name, mark.args[0] if mark else None)

@pytest.fixture(scope="session")
def ray_nodes():
    yield
"""

MODULE_TESTS = """
import pytest

@pytest.fixture(scope="module")
def trained():
    return 1

def test_uses_the_module_fixture(trained):
    pass

def test_uses_the_cluster(ray_nodes, trained):
    pass

def test_uses_nothing():
    pass
"""


def test_tests_of_a_module_fixture_share_a_group_and_a_shared_fixture_takes_precedence(pytester):
    pytester.makeini(
        "[pytest]\naddopts = -p scheduling --strict-markers\nmarkers = xdist_group(name): a group\n"
    )
    pytester.makeconftest(GROUPS_REPORT)
    pytester.makepyfile(test_module=MODULE_TESTS)
    result = pytester.runpytest("--collect-only", "-s")
    groups = dict(line.split()[1:] for line in result.outlines if line.startswith("GROUP"))
    assert groups == {
        "test_uses_the_cluster": "ray",
        "test_uses_the_module_fixture": "test_module.py",
        "test_uses_nothing": "None",
    }


GROUPED_TESTS = """
import os
import pytest

pytestmark = pytest.mark.xdist_group("together")

@pytest.mark.parametrize("n", range(6))
def test_grouped(n):
    print("WORKER", os.environ["PYTEST_XDIST_WORKER"])
"""


def test_a_group_runs_on_one_worker_under_xdist(pytester, monkeypatch):
    # xdist's worker marks a group by renaming the node id, which pytest 9 ignores (scheduling.py).
    monkeypatch.setenv("PYTHONPATH", os.path.dirname(os.path.abspath(__file__)))
    pytester.makeini(
        "[pytest]\naddopts = -p scheduling --strict-markers\nmarkers = xdist_group(name): a group\n"
    )
    pytester.makepyfile(test_grouped=GROUPED_TESTS)
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadgroup", "-s", "-v")
    result.assert_outcomes(passed=6)
    workers = {
        line.split()[0]
        for line in result.outlines
        if line.rstrip().endswith("@together") and " PASSED " in line
    }
    assert len(workers) == 1, result.outlines
