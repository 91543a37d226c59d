"""Storage calls per step under an object-store-like prefix, counted by the benchmark's `latency://`
filesystem (fsspec calls counted one per method call, with injected latency)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from fray.cluster import ThreadCluster
from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

import storage_round_trips  # noqa: E402


@pytest.fixture(scope="module")
def latency_fs(tmp_path_factory):
    """The counting filesystem, rooted in a folder of this module (fsspec keeps one instance per process)."""
    os.environ["LATENCY_ROOT"] = str(tmp_path_factory.mktemp("latency-root"))
    os.environ["LATENCY_S"] = "0"
    fs = storage_round_trips.register()
    yield fs
    os.environ.pop("LATENCY_S", None)


def _steps(n: int) -> list[StepSpec]:
    return [
        StepSpec(name=f"s{i}", fn=storage_round_trips.make_fn(f"s{i}"), hash_attrs={"i": i}) for i in range(n)
    ]


def _runner(prefix: str) -> StepRunner:
    return StepRunner(prefix=prefix, cluster=ThreadCluster(max_workers=4), progress=False)


def test_a_cached_step_costs_one_status_read_and_no_exists_or_info(latency_fs):
    steps = _steps(40)
    _runner("latency://cached").run(steps)
    latency_fs.reset()
    result = _runner("latency://cached").run(steps)
    assert set(result.outcomes.values()) == {"cached"}
    assert latency_fs.calls["cat_file"] == 40
    assert sum(latency_fs.calls.values()) <= 41  # the statuses, and one listing of the prefix
    assert not {"info", "exists", "open"} & set(latency_fs.calls)


def test_a_cold_trivial_step_costs_at_most_ten_calls_of_the_engine(latency_fs):
    latency_fs.reset()
    result = _runner("latency://cold").run(_steps(20))
    assert set(result.outcomes.values()) == {"succeeded"}
    assert latency_fs.callers["engine"] <= 10 * 20 + 1  # + one listing of the prefix by the plan


def test_planning_reads_statuses_of_independent_steps_many_at_once(latency_fs, monkeypatch):
    steps = _steps(200)
    _runner("latency://overlap").run(steps)
    monkeypatch.setenv("LATENCY_S", "0.02")
    latency_fs.reset()
    plan = _runner("latency://overlap").plan(steps)
    assert plan.counts() == {"cached": 200}
    assert latency_fs.most_in_flight >= 32


def test_a_folder_the_listing_shows_is_looked_into_and_an_absent_one_costs_nothing(latency_fs):
    """A step whose folder the plan's listing does not show is new without a call of its own; one
    whose folder is there holding files marin did not write is refused (OutputConflictError)."""
    first, second, third = _steps(3)
    _runner("latency://partial").run([first])
    name = _runner("latency://partial").plan([second]).steps[0].output_path.rsplit("/", 1)[1]
    stray = Path(os.environ["LATENCY_ROOT"], "partial", name)
    stray.mkdir()
    (stray / "half.bin").write_bytes(b"x")
    latency_fs.reset()
    plan = _runner("latency://partial").plan([first, second, third])
    assert [s.state for s in plan.steps] == ["cached", "blocked", "run: new"]
    assert "OutputConflictError" in plan.steps[1].conflict
    assert plan.steps[2].folder_absent and not plan.steps[1].folder_absent
    assert latency_fs.calls["cat_file"] == 2  # the statuses of the two folders that exist


def test_a_cold_trivial_step_on_the_default_cluster_costs_at_most_ten_calls_end_to_end(
    latency_fs, monkeypatch
):
    """Everything a cold step costs on the default LocalCluster: the engine's lease, records and
    release, and the cluster's upload of the step's log (the plan's one listing of the prefix aside)."""
    monkeypatch.delenv("MARIN_CLUSTER", raising=False)
    latency_fs.reset()
    result = StepRunner(prefix="latency://cold-local", progress=False).run(_steps(12))
    assert set(result.outcomes.values()) == {"succeeded"}
    assert sum(latency_fs.calls.values()) <= 10 * 12 + 1
    # The log: one exclusive create per step (its first attempt), no fetch of an earlier log before it.
    assert "get_file" not in latency_fs.calls and "put_file" not in latency_fs.calls
