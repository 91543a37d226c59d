"""The plan says for every step what will happen and why, and rejects invalid DAGs by name."""

import dataclasses
import os

import pytest

from marin.execution.errors import DagError, StepDefinitionError, StepFailedError
from marin.execution.lazy import lower
from marin.execution.lease import try_acquire
from marin.execution.states import PlanState
from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec


def write_marker(path):
    with open(f"{path}/marker.txt", "w") as f:
        f.write("ok")


def fail_always():
    raise RuntimeError("this step always fails")


def _chain(lr=0.1):
    tokenize = StepSpec(name="tokenize", fn=write_marker, hash_attrs={"vocab": 100})
    train = StepSpec(name="train", fn=write_marker, deps=[tokenize], hash_attrs={"lr": lr})
    evaluate = StepSpec(name="evaluate", fn=write_marker, deps=[train])
    report = StepSpec(name="report", fn=write_marker, deps=[evaluate])
    return tokenize, train, evaluate, report


def test_fresh_dag_is_all_new_with_downstream_counts(tmp_path):
    tokenize, train, evaluate, report = _chain()
    plan = StepRunner(prefix=str(tmp_path), progress=False).run([report], dry_run=True)
    assert [s.name for s in plan.steps] == ["tokenize", "train", "evaluate", "report"]
    assert {s.state for s in plan.steps} == {PlanState.RUN_NEW}
    assert [s.downstream_runs for s in plan.steps] == [3, 2, 1, 0]
    assert not (tmp_path / "tokenize").exists() and not any(tmp_path.iterdir())  # a dry run writes nothing


def test_changed_hash_attr_is_diffed_against_the_latest_recorded_output(tmp_path):
    runner = StepRunner(prefix=str(tmp_path), progress=False)
    runner.run([_chain(lr=0.1)[-1]])
    tokenize, train, evaluate, report = _chain(lr=0.2)
    plan = runner.run([report], dry_run=True)
    states = {s.name: s for s in plan.steps}
    assert states["tokenize"].state == PlanState.CACHED
    assert states["train"].state == PlanState.RUN_CHANGED
    assert [(c.field, c.old, c.new) for c in states["train"].changes] == [("hash_attrs.lr", 0.1, 0.2)]
    assert states["train"].downstream_runs == 2
    assert states["evaluate"].state == PlanState.RUN_CHANGED
    assert [c.field for c in states["evaluate"].changes] == ["deps.train"]
    assert plan.to_json()["counts"] == {PlanState.CACHED: 1, PlanState.RUN_CHANGED: 3}


def test_a_changed_step_is_diffed_against_its_own_name_among_many_versions_and_similar_names(tmp_path):
    # Names that one another's start ("s1", "s10", "s1-x") and nested ones share folders; each step's
    # earlier versions are found by its own name only, its newest recorded version chosen.
    def steps(lr):
        return [
            StepSpec(name=name, fn=write_marker, hash_attrs={"lr": lr, "name": name})
            for name in ("s1", "s10", "s1-x", "group/s1", "group/s10")
        ]

    runner = StepRunner(prefix=str(tmp_path), progress=False)
    runner.run(steps(0.1))
    runner.run(steps(0.2))
    plan = runner.run(steps(0.3), dry_run=True)
    assert {s.state for s in plan.steps} == {PlanState.RUN_CHANGED}
    for planned in plan.steps:
        assert [(c.field, c.old, c.new) for c in planned.changes] == [("hash_attrs.lr", 0.2, 0.3)], (
            planned.name
        )
        assert (
            os.path.basename(planned.reason.split("differs from ", 1)[1]).rsplit("-", 1)[0]
            == (planned.name.rsplit("/", 1)[-1])
        )


def test_force_run_plans_a_cached_step_to_run(tmp_path):
    runner = StepRunner(prefix=str(tmp_path), progress=False)
    tokenize, train, evaluate, report = _chain()
    runner.run([train])
    plan = runner.run([report], dry_run=True, force_run=["tokenize"])
    assert plan.of(tokenize).state == PlanState.RUN_FORCED
    assert plan.of(train).state == PlanState.CACHED  # same key: the forced rerun does not invalidate it


def test_a_step_whose_lease_another_runner_holds_is_waiting(tmp_path):
    runner = StepRunner(prefix=str(tmp_path), progress=False)
    tokenize, *_ = _chain()
    out = runner.plan([tokenize]).of(tokenize).output_path
    os.makedirs(out)
    lease = try_acquire(out, "tokenize", timeout=60)  # this live process holds it
    try:
        step = runner.run([tokenize], dry_run=True).of(tokenize)
        assert step.state == PlanState.WAITING and "lease held by" in step.reason
    finally:
        lease.release()


def test_failed_step_is_blocked_until_force_run_failed(tmp_path):
    runner = StepRunner(prefix=str(tmp_path), progress=False)
    bad = StepSpec(name="bad", fn=fail_always)
    after = StepSpec(name="after", fn=write_marker, deps=[bad])
    with pytest.raises(StepFailedError):
        runner.run([after])
    plan = runner.run([after], dry_run=True)
    assert plan.of(bad).state == PlanState.BLOCKED and "force_run_failed" in plan.of(bad).reason
    assert plan.of(after).state == PlanState.BLOCKED
    retry = runner.run([after], dry_run=True, force_run_failed=True)
    assert retry.of(bad).will_run and retry.of(after).will_run


def test_identical_steps_are_one_step(tmp_path):
    a1 = StepSpec(name="same", fn=write_marker, hash_attrs={"x": 1})
    a2 = StepSpec(name="same", fn=write_marker, hash_attrs={"x": 1})
    top = StepSpec(name="top", fn=write_marker, deps=[a1])
    plan = StepRunner(prefix=str(tmp_path), progress=False).plan([top, a2])
    assert len(plan.steps) == 2 and plan.of(a1) is plan.of(a2)


def test_two_steps_claiming_one_path_is_an_error_naming_both(tmp_path):
    a = StepSpec(name="alpha", fn=write_marker, output_path="shared/out", hash_attrs={"x": 1})
    b = StepSpec(name="beta", fn=write_marker, output_path="shared/out", hash_attrs={"x": 2})
    with pytest.raises(DagError, match="'alpha' and 'beta' both claim the output path"):
        StepRunner(prefix=str(tmp_path), progress=False).run([a, b])


def test_nested_output_paths_are_rejected(tmp_path):
    outer = StepSpec(name="outer", fn=write_marker, output_path="data")
    inner = StepSpec(name="inner", fn=write_marker, output_path="data/inner")
    with pytest.raises(DagError, match="'inner' writes to .* inside the output of step 'outer'"):
        StepRunner(prefix=str(tmp_path), progress=False).plan([outer, inner])


def test_cycle_is_an_error_that_names_the_cycle(tmp_path):
    a = StepSpec(name="a", fn=write_marker)
    b = StepSpec(name="b", fn=write_marker, deps=[a])
    c = StepSpec(name="c", fn=write_marker, deps=[b])
    object.__setattr__(a, "deps", (c,))  # frozen specs can only form a cycle by force
    with pytest.raises(DagError, match="cycle: c -> b -> a -> c"):
        StepRunner(prefix=str(tmp_path), progress=False).run([c])


_HANDLES: dict = {}


@dataclasses.dataclass(frozen=True)
class _Handle:
    """A lazy handle that names its dependency, so two handles can name each other."""

    name: str
    needs: str

    def to_step_spec(self) -> StepSpec:
        return StepSpec(name=self.name, fn=write_marker, deps=[lower(_HANDLES[self.needs])])


def test_lazy_handles_that_depend_on_each_other_are_a_named_cycle(tmp_path):
    _HANDLES.update(x=_Handle("x", "y"), y=_Handle("y", "x"))
    with pytest.raises(DagError, match="cycle: 'x' -> 'y' -> 'x'"):
        StepRunner(prefix=str(tmp_path), progress=False).run([_HANDLES["x"]])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "../escape"}, "escapes the prefix"),
        ({"name": "ok", "output_path": "/etc/out"}, "is absolute"),
        ({"name": "ok", "output_path": "a/../../b"}, "escapes the prefix"),
        ({"name": "ok", "output_path": "gs://bucket/x"}, "is absolute"),
        ({"name": "ok", "hash_attrs": {"when": object()}}, r"hash_attrs.when is a object"),
        (
            {"name": "ok", "hash_attrs": {"nested": [1, {"bad": {1, 2}}]}},
            r"hash_attrs.nested\[1\].bad is a set",
        ),
    ],
)
def test_bad_step_definitions_name_the_step_and_field(kwargs, message):
    with pytest.raises(StepDefinitionError, match=message) as err:
        StepSpec(fn=write_marker, **kwargs)
    assert repr(kwargs["name"]) in str(err.value)
