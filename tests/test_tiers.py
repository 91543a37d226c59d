"""The suite's tiers (tests/tiers.py): the slow tier is left out by default and the call-time guard
fails a default-tier test that runs too long, naming its duration."""

from __future__ import annotations

import pytest

TESTS = """
import time
import pytest

def test_quick():
    pass

def test_sleepy():
    time.sleep(0.5)

@pytest.mark.slow
def test_full_size():
    time.sleep(0.5)
"""


@pytest.fixture
def sample(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\naddopts = -p tiers --strict-markers\nmarkers = slow: the slow tier\n")
    pytester.makepyfile(test_sample=TESTS)
    return pytester


def run(sample: pytest.Pytester, *args: str, limit: str = "0.2") -> pytest.RunResult:
    """Run the sample's tests in this process with the call limit at `limit` seconds for that run only
    (this test's own report, made after it returns, sees the suite's limit again)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MARIN_TEST_CALL_LIMIT", limit)
        return sample.runpytest(*args)


def test_default_tier_leaves_slow_out_and_fails_a_test_over_the_limit_naming_its_duration(sample):
    result = run(sample)
    result.assert_outcomes(passed=1, failed=1, deselected=1)
    result.stdout.fnmatch_lines(
        ["*test_sample.py::test_sleepy took 0.* s, over the default tier's limit of 0.2 s*"]
    )


def test_all_runs_the_slow_tier_too_and_the_limit_spares_slow_tests(sample):
    result = run(sample, "--all")
    result.assert_outcomes(passed=2, failed=1)


def test_a_mark_expression_chooses_the_tier(sample):
    run(sample, "-m", "slow").assert_outcomes(passed=1, deselected=2)


def test_a_slow_test_named_by_its_node_id_runs(sample):
    run(sample, "test_sample.py::test_full_size").assert_outcomes(passed=1)


def test_the_limit_can_be_raised_for_a_loaded_machine(sample):
    run(sample, limit="30").assert_outcomes(passed=2, deselected=1)


def test_an_unregistered_marker_is_an_error(sample):
    sample.makepyfile(test_typo="import pytest\n\n@pytest.mark.slwo\ndef test_x():\n    pass\n")
    result = run(sample, "test_typo.py")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*'slwo' not found in `markers` configuration option*"])


def test_a_test_with_its_own_budget_passes_within_it_and_fails_past_it(pytester):
    pytester.makeini(
        "[pytest]\naddopts = -p tiers --strict-markers\nmarkers =\n    slow: the slow tier\n"
        "    call_limit(seconds): own budget\n"
    )
    pytester.makepyfile(
        test_budget="""
import time
import pytest

@pytest.mark.call_limit(5)
def test_within_its_budget():
    time.sleep(0.5)

@pytest.mark.call_limit(0.3)
def test_past_its_budget():
    time.sleep(0.5)
"""
    )
    result = run(pytester, limit="0.2")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_budget.py::test_past_its_budget took 0.* s, over *0.3 s*"])
