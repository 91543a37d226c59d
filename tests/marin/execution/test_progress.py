"""A run's progress lines name each step's outcome: a failure in capitals with its log, the rest by
their outcome's own name."""

from __future__ import annotations

import pytest

from fray.cluster import ThreadCluster
from marin.execution.errors import StepFailedError
from marin.execution.progress import OUTCOME_LABELS
from marin.execution.states import RunOutcome
from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec


def make_nothing():
    return {"ok": True}


def divide_by_zero():
    return 1 / 0


def test_every_outcome_has_a_label_and_only_a_failure_or_a_loss_is_shouted():
    assert set(OUTCOME_LABELS) == set(RunOutcome)
    shouted = {o for o, label in OUTCOME_LABELS.items() if label != o.value}
    assert shouted == {RunOutcome.FAILED, RunOutcome.LOST}
    assert OUTCOME_LABELS[RunOutcome.FAILED] == "FAILED" and OUTCOME_LABELS[RunOutcome.LOST] == "LOST"


def test_a_runs_lines_show_succeeded_failed_and_blocked_steps(tmp_path, capfd):
    good = StepSpec(name="good", fn=make_nothing)
    bad = StepSpec(name="bad", fn=divide_by_zero)
    downstream = StepSpec(name="downstream", fn=make_nothing, deps=[bad], hash_attrs={"after": "bad"})
    runner = StepRunner(prefix=str(tmp_path), max_concurrent=1, cluster=ThreadCluster())
    with pytest.raises(StepFailedError):
        runner.run([good, downstream])
    lines = capfd.readouterr().err.splitlines()
    bad_out = runner.plan([bad]).of(bad).output_path

    ends = [
        line.split("] ", 1)[1]
        for line in lines
        if "] " in line and not line.split("] ", 1)[1].startswith("start")
    ]

    def line_of(name: str) -> str:
        return next(line for line in ends if line.split()[1:2] == [name])

    assert line_of("good").startswith("succeeded good (")
    assert line_of("bad").startswith("FAILED    bad (") and line_of("bad").endswith(
        f"log: {bad_out}/.executor_log"
    )
    assert line_of("downstream").startswith("blocked   downstream")
