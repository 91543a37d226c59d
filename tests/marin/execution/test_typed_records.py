"""The engine's records are typed: a run writes them, they read back as the same objects, their JSON
is the documented one, and a record of another shape is an error naming its file. The folder names
that writer and reader share (default outputs, moved-aside copies, experiment modules) come from one
helper each, and read back what was written."""

import json
import sys
from pathlib import Path

import pytest

from marin.execution.artifact import ArtifactRecord, ExecutorInfo, read_artifact, read_info
from marin.execution.aside import AsideKind, aside_name, move_aside, read_aside
from marin.execution.discover import experiment_module_name, import_file, is_experiment_module
from marin.execution.errors import MarinError, UnreadableRecordError
from marin.execution.explain import output_records
from marin.execution.gc import collect
from marin.execution.outputs import default_output_key, default_output_name
from marin.execution.run_provenance import experiment_file
from marin.execution.states import OutputState, PlanState, RunOutcome, StepState
from marin.execution.status import STATUS_FILE, StatusRecord, event, read_status, write_status
from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec


def _write_and_return(output_path):
    (Path(output_path) / "data.txt").write_text("hello")
    return {"rows": 3}


def test_a_runs_records_read_back_typed_and_their_json_is_the_documented_one(tmp_path):
    step = StepSpec(name="make", fn=_write_and_return, hash_attrs={"n": 3})
    result = StepRunner(prefix=str(tmp_path), progress=False).run([step])
    out = result.output_path(step)
    assert result.outcomes == {out: RunOutcome.SUCCEEDED} and result.outcomes[out] == "succeeded"

    status = read_status(out)
    assert isinstance(status, StatusRecord) and status.state is StepState.SUCCESS
    assert [e.state for e in status.events] == [StepState.RUNNING, StepState.SUCCESS]
    on_disk = json.loads(Path(out, STATUS_FILE).read_text())
    assert list(on_disk) == ["state", "name", "key", "events"] and on_disk["state"] == "SUCCESS"
    assert set(on_disk["events"][0]) == {"state", "time", "host", "pid", "key", "deps", "attempt"}
    assert set(on_disk["events"][1]) == {"state", "time", "host", "pid"}  # unset fields are not written
    assert status.to_json() == on_disk

    info = read_info(out)
    assert isinstance(info, ExecutorInfo) and info.name == "make" and info.hash_attrs == {"n": 3}
    info_json = json.loads(Path(out, ".executor_info").read_text())
    assert "adopted" not in info_json and "manifest" not in info_json and info_json["version"] is None
    assert info.to_json() == info_json and ExecutorInfo.from_json(info_json, "x") == info
    artifact = read_artifact(out)
    assert isinstance(artifact, ArtifactRecord) and artifact.result == {"rows": 3}
    assert [f["path"] for f in artifact.files] == ["data.txt"] and artifact.total_bytes == 5
    # The records' classes never enter the key: a second run is cached under the same key.
    again = StepRunner(prefix=str(tmp_path), progress=False).run([step])
    assert again.outcomes == {out: RunOutcome.CACHED} and read_status(out).key == status.key


def test_a_status_of_another_shape_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / STATUS_FILE
    path.write_text(json.dumps({"state": "DONE", "name": "s", "key": "k", "events": []}))
    with pytest.raises(UnreadableRecordError) as err:
        read_status(str(tmp_path), strict=True)
    assert str(path) in str(err.value) and "not a StatusRecord" in str(err.value)
    assert read_status(str(tmp_path)) is None  # a lenient reader sees no status
    with pytest.raises(MarinError, match=str(path)):
        output_records(str(tmp_path))
    path.write_text('{"state": "SUCCESS"')
    with pytest.raises(UnreadableRecordError, match="not valid JSON"):
        read_status(str(tmp_path), strict=True)


def test_a_status_written_from_events_reads_back_equal(tmp_path):
    events = [
        event(StepState.RUNNING, key="k" * 64, deps=("/a", "/b")),
        event(StepState.FAILED, error="boom"),
    ]
    write_status(str(tmp_path), "step", "k" * 64, events)
    status = read_status(str(tmp_path), strict=True)
    assert status == StatusRecord(StepState.FAILED, "step", "k" * 64, tuple(events))
    assert StatusRecord.from_json(status.to_bytes(), "x") == status


def test_states_are_their_strings():
    assert StepState.SUCCESS == "SUCCESS" and PlanState.RUN_NEW == "run: new"
    assert RunOutcome.CACHED == PlanState.CACHED == "cached" and f"{OutputState.MOVED_ASIDE}" == "MOVED-ASIDE"
    assert json.dumps({"s": StepState.FAILED}) == '{"s": "FAILED"}'


@pytest.mark.parametrize("name", ["tokenize", "data/tokenized/en", "a-b_c.d"])
def test_a_default_output_name_reads_back_its_key(name):
    key = "0123456789abcdef" * 4
    folder = default_output_name(name, key).rsplit("/", 1)[-1]
    assert default_output_key(folder, name) == key[:8]
    assert default_output_key(folder + "x", name) is None and default_output_key(folder, name + "x") is None


def test_gc_takes_an_older_default_output_for_garbage_by_its_name(tmp_path):
    paths = []
    for n in (1, 2):
        step = StepSpec(name="make", fn=_write_and_return, hash_attrs={"n": n})
        paths.append(StepRunner(prefix=str(tmp_path), progress=False).run([step]).output_path(step))
    assert [g.path for g in collect(str(tmp_path)).garbage] == [paths[0]]


@pytest.mark.parametrize("kind", list(AsideKind))
def test_a_moved_aside_copy_is_recognised_by_the_name_it_was_given(tmp_path, kind):
    out = tmp_path / "out"
    out.mkdir()
    (out / "f.txt").write_text("x")
    moved = move_aside(str(out), kind, "feedfacecafe", "step", "why")
    record = read_aside(moved)
    assert record is not None and record.origin == str(out) and record.moved == ["f.txt"]
    assert Path(moved).name == aside_name("out", kind, "feedfacecafe", record.stamp)
    assert json.loads(Path(moved, ".marin_aside").read_text())["from"] == str(out)
    renamed = tmp_path / f"{Path(moved).name}-copy"
    Path(moved).rename(renamed)
    assert read_aside(str(renamed)) is None  # a name the helper did not give is never taken for a copy


def test_the_experiment_module_name_is_how_the_experiment_file_is_found(tmp_path, monkeypatch):
    script = tmp_path / "my-exp.py"
    script.write_text("X = 1\n")
    name = experiment_module_name(str(script))
    assert is_experiment_module(name) and not is_experiment_module("my_exp")
    monkeypatch.setattr("marin.execution.run_provenance._experiment_module_file", None)
    # An experiment another test imported into this process (one worker runs many tests) is not this one.
    for other in [n for n in sys.modules if is_experiment_module(n)]:
        monkeypatch.delitem(sys.modules, other)
    module = import_file(str(script))
    try:
        assert module.__name__ == name and experiment_file() == str(script)
    finally:
        sys.modules.pop(name, None)


def test_a_preemption_event_reads_back_and_is_shown_apart_from_failures(tmp_path):
    from marin.execution.explain import explain_output, output_status

    lost = {"replica": 1, "node": "n2", "retry": 1, "of": 2, "error": "worker or node died"}
    events = [
        event(StepState.RUNNING, key="k" * 64, deps=()),
        event(StepState.RUNNING, preempted=lost),
        event(StepState.SUCCESS),
    ]
    write_status(str(tmp_path), "gang", "k" * 64, events)
    row = output_status(str(tmp_path), [STATUS_FILE], now=events[-1].time + 1)
    assert row.state == OutputState.SUCCESS and "preempted 1x" in row.detail
    assert "preempted: lost replica 1 on node n2; retry 1 of 2" in explain_output(str(tmp_path))
