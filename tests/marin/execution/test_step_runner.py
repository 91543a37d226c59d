"""StepRunner: runs what is not cached, in parallel, records provenance, and reports failures fully."""

import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import fsspec
import pytest
import xxhash

from fray.cluster import ThreadCluster
from marin.execution.context import current
from marin.execution.errors import StepFailedError
from marin.execution.explain import explain_output, list_outputs
from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec

REPO = Path(__file__).resolve().parents[3]
SEED_EXAMPLE = REPO / "experiments" / "tutorials" / "custom_step.py"


def write_numbers(path):
    os.makedirs(f"{path}/shard", exist_ok=True)
    Path(f"{path}/shard/numbers.txt").write_text("1 2 3")
    return {"count": 3}


def sum_numbers():
    ctx = current()
    numbers = Path(ctx.path_of("numbers"), "shard", "numbers.txt").read_text().split()
    Path(ctx.output_path, "sum.txt").write_text(str(sum(map(int, numbers))))
    return {"sum": sum(map(int, numbers))}


def divide_by_zero():
    return 1 / 0


def test_seed_custom_step_example_runs_unchanged(tmp_path):
    env = {**os.environ, "MARIN_PREFIX": ""}
    for _ in range(2):  # the second run reuses the cached output
        done = subprocess.run(
            [sys.executable, str(SEED_EXAMPLE)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
    out = tmp_path / "marin-outputs" / "outputs" / "preprocess"
    status = json.loads((out / ".executor_status").read_text())
    assert status["state"] == "SUCCESS" and [e["state"] for e in status["events"]] == ["RUNNING", "SUCCESS"]
    assert "1 cached" in done.stderr
    info = json.loads((out / ".executor_info").read_text())
    assert info["hash_attrs"] == {"param": 42} and info["fn"].endswith(":preprocess")


def test_dependency_outputs_and_records(tmp_path):
    numbers = StepSpec(name="numbers", fn=write_numbers, hash_attrs={"n": 3})
    total = StepSpec(name="sum", fn=sum_numbers, deps=[numbers])
    result = StepRunner(prefix=str(tmp_path), progress=False).run([total])
    out = Path(result.output_path(total))
    assert (out / "sum.txt").read_text() == "6"
    assert result.results[str(out)] == {"sum": 6}
    info = json.loads((out / ".executor_info").read_text())
    assert info["deps"] == [
        {"name": "numbers", "key": result.plan.of(numbers).key, "path": result.output_path(numbers)}
    ]
    assert info["fn"] == f"{__name__}:sum_numbers" and info["code_fingerprint"]
    assert info["end_time"] >= info["start_time"] and info["environment"]["python"]
    artifact = json.loads(Path(result.output_path(numbers), ".artifact.json").read_text())
    digest = xxhash.xxh3_128_hexdigest((Path(result.output_path(numbers)) / "shard/numbers.txt").read_bytes())
    assert artifact == {
        "result": {"count": 3},
        "total_bytes": 5,
        "files": [{"path": "shard/numbers.txt", "size": 5, "xxh3_128": digest}],
    }
    again = StepRunner(prefix=str(tmp_path), progress=False).run([total])
    assert set(again.outcomes.values()) == {"cached"}


def test_independent_steps_run_concurrently(tmp_path):
    # Threads, so the steps can share a barrier that only passes if both run at the same time.
    barrier = threading.Barrier(2, timeout=30)

    def meet():
        barrier.wait()

    steps = [StepSpec(name=f"meet{i}", fn=meet, hash_attrs={"i": i}) for i in range(2)]
    runner = StepRunner(prefix=str(tmp_path), max_concurrent=2, cluster=ThreadCluster(), progress=False)
    assert set(runner.run(steps).outcomes.values()) == {"succeeded"}


def test_failure_blocks_dependents_finishes_independent_branches_and_lists_every_failure(tmp_path):
    good = StepSpec(name="good", fn=write_numbers)
    bad = StepSpec(name="bad", fn=divide_by_zero)
    also_bad = StepSpec(name="also-bad", fn=divide_by_zero, hash_attrs={"other": True})
    downstream = StepSpec(name="downstream", fn=sum_numbers, deps=[bad, good])
    runner = StepRunner(prefix=str(tmp_path), max_concurrent=1, progress=False)
    with pytest.raises(StepFailedError) as err:
        runner.run([downstream, also_bad])
    failure = err.value
    assert set(failure.failures) == {"bad", "also-bad"} and failure.blocked == ["downstream"]
    bad_out = runner.plan([bad]).of(bad).output_path
    message = str(failure)
    assert "step 'bad' failed: ZeroDivisionError: division by zero" in message
    assert "in divide_by_zero" in failure.failures["bad"]  # the traceback
    assert f"log: {bad_out}/.executor_log" in message
    assert "ZeroDivisionError" in Path(bad_out, ".executor_log").read_text()
    assert json.loads(Path(bad_out, ".executor_status").read_text())["state"] == "FAILED"
    # The independent branch finished and stays done.
    assert runner.plan([good]).of(good).state == "cached"


def test_force_run_failed_retries_and_force_run_reruns_without_deleting(tmp_path):
    flag = tmp_path / "works"

    def flaky(path):
        if not flag.exists():
            raise RuntimeError("not yet")
        Path(path, "ok.txt").write_text("ok")

    step = StepSpec(name="flaky", fn=flaky, version="1")
    runner = StepRunner(prefix=str(tmp_path / "out"), progress=False)
    with pytest.raises(StepFailedError):
        runner.run([step])
    flag.touch()
    with pytest.raises(StepFailedError, match="failed in an earlier run"):
        runner.run([step])
    assert runner.run([step], force_run_failed=True).outcomes == {
        runner.plan([step]).of(step).output_path: "succeeded"
    }
    out = Path(runner.plan([step]).of(step).output_path)
    events = json.loads((out / ".executor_status").read_text())["events"]
    assert [e["state"] for e in events] == ["RUNNING", "FAILED", "RUNNING", "SUCCESS"]
    runner.run([step], force_run=["flaky"])
    archived = list(out.parent.glob(f"{out.name}.superseded-*"))
    assert len(archived) == 1 and (archived[0] / "ok.txt").exists()  # the old success is kept aside
    assert (out / "ok.txt").exists()


class UnreachableCluster(ThreadCluster):
    """A cluster whose submit fails at once, as RayCluster's does when it cannot reach Ray."""

    def submit(self, task, *, name, resources=None, log_path=None, on_preemption=None):
        raise ConnectionError(f"cannot reach the cluster to start {name}")


def test_a_submit_that_raises_records_the_step_as_failed(tmp_path):
    step = StepSpec(name="unsent", fn=write_numbers, version="1")
    runner = StepRunner(prefix=str(tmp_path), cluster=UnreachableCluster(), progress=False)
    with pytest.raises(StepFailedError, match="cannot reach the cluster to start unsent"):
        runner.run([step])
    status = json.loads(Path(runner.plan([step]).of(step).output_path, ".executor_status").read_text())
    assert [e["state"] for e in status["events"]] == ["RUNNING", "FAILED"]
    assert "ConnectionError" in status["events"][-1]["error"]
    assert runner.plan([step]).of(step).state == "blocked"  # a failure, not an interrupted attempt


def test_changed_step_at_an_explicit_path_keeps_the_old_output_aside(tmp_path):
    first = StepSpec(name="data", fn=write_numbers, output_path="fixed/data", hash_attrs={"v": 1})
    second = StepSpec(name="data", fn=write_numbers, output_path="fixed/data", hash_attrs={"v": 2})
    runner = StepRunner(prefix=str(tmp_path), progress=False)
    runner.run([first])
    plan = runner.plan([second])
    assert plan.of(second).state == "run: changed"
    assert [str(c) for c in plan.of(second).changes] == ["hash_attrs.v: 1 -> 2"]
    runner.run([second])
    assert json.loads((tmp_path / "fixed/data/.executor_status").read_text())["key"] == plan.of(second).key
    archived = list((tmp_path / "fixed").glob("data.superseded-*"))
    assert len(archived) == 1 and json.loads((archived[0] / ".executor_info").read_text())["hash_attrs"] == {
        "v": 1
    }


def test_non_json_return_value_fails_the_step_with_a_clear_message(tmp_path):
    step = StepSpec(name="returns-set", fn=lambda: {"bad": {1, 2}})
    with pytest.raises(StepFailedError, match=r"step 'returns-set': returned value.bad is a set"):
        StepRunner(prefix=str(tmp_path), progress=False).run([step])


@dataclass(frozen=True)
class Summary:
    """A dataclass result."""

    rows: int


def test_dataclass_results_are_stored(tmp_path):
    step = StepSpec(name="summary", fn=lambda: Summary(rows=7))
    result = StepRunner(prefix=str(tmp_path), progress=False).run([step])
    assert list(result.results.values()) == [{"rows": 7}]


def _write_with_fsspec(path):
    with fsspec.open(f"{path}/data.txt", "w") as f:
        f.write("in memory")
    return {"where": current().output_path}


def _read_with_fsspec():
    ctx = current()
    with fsspec.open(ctx.path_of("mem-writer") + "/data.txt") as f:
        return {"read": f.read().decode()}


def test_memory_storage_runs_caches_and_records(tmp_path, monkeypatch):
    monkeypatch.delenv("MARIN_CLUSTER", raising=False)  # the default: an in-process prefix runs on threads
    prefix = f"memory://marin-test-{os.getpid()}/prefix"
    writer = StepSpec(name="mem-writer", fn=_write_with_fsspec)
    reader = StepSpec(name="mem-reader", fn=_read_with_fsspec, deps=[writer])
    runner = StepRunner(prefix=prefix, progress=False)
    result = runner.run([reader])
    assert result.results[result.output_path(reader)] == {"read": "in memory"}
    fs = fsspec.filesystem("memory")
    status = json.loads(fs.cat_file(result.output_path(writer) + "/.executor_status"))
    assert status["state"] == "SUCCESS"
    artifact = json.loads(fs.cat_file(result.output_path(writer) + "/.artifact.json"))
    assert artifact["files"] == [
        {"path": "data.txt", "size": 9, "xxh3_128": xxhash.xxh3_128_hexdigest(b"in memory")}
    ]
    assert not [p for p in fs.find(prefix) if ".executor_lease" in p]  # leases released
    assert set(runner.run([reader]).outcomes.values()) == {"cached"}
    rows = list_outputs(prefix)
    assert sorted((r.name, r.state) for r in rows) == [("mem-reader", "SUCCESS"), ("mem-writer", "SUCCESS")]
    assert 'result   {"read":"in memory"}' in explain_output(result.output_path(reader))


def test_default_prefix_is_marin_prefix_env_then_local_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("MARIN_PREFIX", str(tmp_path / "from-env"))
    assert StepRunner().prefix == str(tmp_path / "from-env")
    monkeypatch.delenv("MARIN_PREFIX")
    monkeypatch.chdir(tmp_path)
    assert StepRunner().prefix == str(tmp_path / "marin-outputs")
    assert StepRunner(prefix="explicit").prefix == str(tmp_path / "explicit")


def _bad_inputs(good):
    """Each builds an invalid run next to the good step; each must fail before touching any output."""

    def cycle():
        a = StepSpec(name="cyc-a", fn=write_numbers)
        b = StepSpec(name="cyc-b", fn=write_numbers, deps=[a, good])
        object.__setattr__(a, "deps", (b,))
        return [b]

    def clash():
        return [
            good,
            StepSpec(
                name="other",
                fn=write_numbers,
                output_path=os.path.relpath(
                    StepRunner(prefix="/p", progress=False).plan([good]).of(good).output_path, "/p"
                ),
            ),
        ]

    return {
        "cycle": (cycle, "cycle: cyc-b -> cyc-a -> cyc-b"),
        "non-json hash_attrs": (
            lambda: [StepSpec(name="nj", fn=write_numbers, hash_attrs={"p": Path("x")})],
            "step 'nj': hash_attrs.p is a PosixPath",
        ),
        "escaping name": (lambda: [StepSpec(name="../../etc", fn=write_numbers)], "step '../../etc'"),
        "absolute output": (
            lambda: [StepSpec(name="abs", fn=write_numbers, output_path="/tmp/x")],
            "step 'abs'",
        ),
        "one path two steps": (clash, "'numbers' and 'other' both claim"),
        "fn raises": (lambda: [StepSpec(name="boom", fn=divide_by_zero), good], "ZeroDivisionError"),
    }


@pytest.mark.parametrize(
    "case",
    ["cycle", "non-json hash_attrs", "escaping name", "absolute output", "one path two steps", "fn raises"],
)
def test_bad_input_names_the_step_and_loses_nothing_completed_before(tmp_path, case):
    good = StepSpec(name="numbers", fn=write_numbers)
    runner = StepRunner(prefix=str(tmp_path), progress=False)
    runner.run([good])
    build, message = _bad_inputs(good)[case]
    with pytest.raises(Exception, match=message):
        runner.run(build())
    out = Path(runner.plan([good]).of(good).output_path)
    assert (out / "shard" / "numbers.txt").read_text() == "1 2 3"
    assert runner.plan([good]).of(good).state == "cached"


def test_steps_run_in_subprocesses_through_a_local_cluster(tmp_path):
    from fray.cluster import LocalCluster

    def in_child(path):  # defined here so cloudpickle ships it by value to the child process
        from marin.execution.context import current

        Path(path, "pid.txt").write_text(str(os.getpid()))
        return {
            "output_matches_context": current().output_path == path,
            "parent": current().path_of("numbers"),
        }

    numbers = StepSpec(name="numbers", fn=write_numbers)
    child = StepSpec(name="child", fn=in_child, deps=[numbers])
    cluster = LocalCluster(cpu=2)
    try:
        result = StepRunner(prefix=str(tmp_path), cluster=cluster, progress=False).run([child])
    finally:
        cluster.shutdown()
    out = result.output_path(child)
    assert int(Path(out, "pid.txt").read_text()) != os.getpid()
    assert result.results[out] == {"output_matches_context": True, "parent": result.output_path(numbers)}
