"""The engine deletes, clears or moves only what it can prove it wrote: each data-loss case of issue 10.

Every test puts a user's bytes where a step would write, runs the real runner, and checks the bytes
are still there (or moved aside, with the path reported) and that the error names the path.
"""

import json
import os
from pathlib import Path

import pytest

from fray.cluster import ThreadCluster
from marin.execution.errors import DagError, StepDefinitionError, StepFailedError
from marin.execution.states import PlanState
from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec


def _runner(prefix):
    return StepRunner(prefix=str(prefix), cluster=ThreadCluster(), progress=False)


def _write(name, text="made by the step"):
    def fn(path):
        Path(path, name).write_text(text)

    return fn


def _status(path):
    return json.loads((Path(path) / ".executor_status").read_text())


def test_a_fixed_output_path_at_a_folder_marin_did_not_write_fails_before_fn_and_keeps_the_files(tmp_path):
    prefix = tmp_path / "prefix"
    user = prefix / "models" / "mine"
    user.mkdir(parents=True)
    (user / "weights.bin").write_bytes(b"precious")
    ran = []
    step = StepSpec(name="train", fn=lambda path: ran.append(path), output_path="models/mine")

    plan = _runner(prefix).plan([step])
    assert plan.steps[0].state == PlanState.BLOCKED and str(user) in plan.steps[0].reason
    with pytest.raises(StepFailedError) as err:
        _runner(prefix).run([step])
    message = str(err.value)
    assert "OutputConflictError" in message and str(user) in message
    assert "adopt=True" in message and "another output_path" in message and "by hand" in message
    assert ran == []
    assert sorted(p.name for p in user.iterdir()) == ["weights.bin"]  # not even a lease file left
    assert (user / "weights.bin").read_bytes() == b"precious"


def test_a_folder_holding_another_steps_output_is_a_conflict_too(tmp_path):
    prefix = tmp_path / "prefix"
    _runner(prefix).run([StepSpec(name="first", fn=_write("a.txt"), output_path="shared")])
    with pytest.raises(StepFailedError) as err:
        _runner(prefix).run([StepSpec(name="second", fn=_write("b.txt"), output_path="shared")])
    assert f"{prefix}/shared" in str(err.value) and "'first'" in str(err.value)
    assert (prefix / "shared" / "a.txt").read_text() == "made by the step"
    assert not (prefix / "shared" / "b.txt").exists()


def test_output_path_equal_to_the_prefix_is_a_plan_error_and_the_prefix_is_untouched(tmp_path):
    prefix = tmp_path / "prefix"
    prefix.mkdir()
    (prefix / "keep.txt").write_text("user data")
    step = StepSpec(name="everything", fn=_write("x.txt"), output_path=".")
    with pytest.raises(DagError) as err:
        _runner(prefix).run([step])
    assert "'everything'" in str(err.value) and str(prefix) in str(err.value)
    with pytest.raises(DagError):
        _runner(prefix).run([StepSpec(name="dot-slash", fn=_write("x.txt"), output_path="./")])
    with pytest.raises(DagError) as err:
        _runner(prefix).run([StepSpec(name="up", fn=_write("x.txt"), output_path="x/..")])
    message = str(err.value)
    assert "'up'" in message and "'x/..'" in message and str(prefix) in message
    assert "is the prefix itself" in message and "escapes" not in message
    assert "give a subfolder such as 'up'" in message
    assert sorted(p.name for p in prefix.iterdir()) == ["keep.txt"]


def test_an_output_path_that_leaves_the_prefix_or_takes_a_detour_is_refused_at_declaration():
    with pytest.raises(
        StepDefinitionError, match=r"'x/\.\./\.\.' escapes the prefix \(it resolves to '\.\.'"
    ):
        StepSpec(name="up", fn=_write("x.txt"), output_path="x/../..")
    with pytest.raises(StepDefinitionError, match=r"'x/\.\./y' has '\.\.' segments; spell it plainly as 'y'"):
        StepSpec(name="detour", fn=_write("x.txt"), output_path="x/../y")
    with pytest.raises(StepDefinitionError, match=r"'a//b' has empty segments"):
        StepSpec(name="gap", fn=_write("x.txt"), output_path="a//b")


def test_an_output_that_would_contain_recorded_outputs_is_a_plan_error(tmp_path):
    prefix = tmp_path / "prefix"
    stories = StepSpec(name="stories", fn=_write("tokens.bin"), output_path="tokenized/stories-abc")
    _runner(prefix).run([stories])
    parent = StepSpec(name="all", fn=_write("x.bin"), output_path="tokenized")
    with pytest.raises(DagError) as err:
        _runner(prefix).plan([parent])
    message = str(err.value)
    assert "'all'" in message and "'stories'" in message and f"{prefix}/tokenized/stories-abc" in message
    with pytest.raises(DagError):
        _runner(prefix).run([parent])
    assert (prefix / "tokenized" / "stories-abc" / "tokens.bin").read_text() == "made by the step"
    assert _status(prefix / "tokenized" / "stories-abc")["state"] == "SUCCESS"


def test_an_output_that_would_sit_inside_a_recorded_output_is_a_plan_error(tmp_path):
    prefix = tmp_path / "prefix"
    _runner(prefix).run([StepSpec(name="model", fn=_write("w.bin"), output_path="model")])
    inner = StepSpec(name="inner", fn=_write("x.bin"), output_path="model/eval")
    with pytest.raises(DagError) as err:
        _runner(prefix).run([inner])
    assert "'inner'" in str(err.value) and "'model'" in str(err.value) and f"{prefix}/model" in str(err.value)
    assert sorted(p.name for p in (prefix / "model").iterdir() if not p.name.startswith(".")) == ["w.bin"]


def test_a_symlinked_output_folder_is_refused_and_nothing_outside_the_prefix_is_touched(tmp_path):
    prefix = tmp_path / "prefix"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "theirs.txt").write_text("not marin's")
    prefix.mkdir()
    os.symlink(outside, prefix / "linked")
    for output_path in ("linked", "linked/inner"):
        with pytest.raises(DagError) as err:
            _runner(prefix).run([StepSpec(name="s", fn=_write("x.txt"), output_path=output_path)])
        assert f"{prefix}/linked" in str(err.value) and "symlink" in str(err.value)
    assert sorted(p.name for p in outside.iterdir()) == ["theirs.txt"]
    assert (outside / "theirs.txt").read_text() == "not marin's"


@pytest.mark.parametrize("damage", ["empty", "garbled", "fifo", "directory"])
def test_an_unreadable_status_moves_the_output_aside_and_says_where(tmp_path, damage):
    prefix = tmp_path / "prefix"
    step = StepSpec(name="train", fn=_write("export.bin", "v2"), output_path="train", resumable=True)
    _runner(prefix).run([step])
    out = prefix / "train"
    (out / "checkpoint.bin").write_text("step 5000")
    status = out / ".executor_status"
    status.unlink()
    if damage == "empty":
        status.write_bytes(b"")
    elif damage == "garbled":
        status.write_bytes(b'{"state": "SUCC\x00\xff')
    elif damage == "fifo":
        os.mkfifo(status)
    else:
        status.mkdir()

    planned = _runner(prefix).plan([step]).steps[0]
    assert planned.state == PlanState.RUN_RETRY and "unreadable status" in planned.reason
    aside = Path(planned.aside_path)
    assert str(aside) in planned.reason and not aside.exists()

    _runner(prefix).run([step])
    assert (aside / "checkpoint.bin").read_text() == "step 5000"  # moved, never deleted
    assert (aside / "export.bin").read_text() == "v2"
    assert (aside / ".executor_status").exists() or (aside / ".executor_status").is_fifo()
    assert str(aside) in (out / ".executor_log").read_text()
    assert _status(out)["state"] == "SUCCESS"
    assert _runner(prefix).plan([step]).steps[0].state == PlanState.CACHED


def test_adopt_takes_an_existing_folder_as_the_output_without_running_fn(tmp_path):
    prefix = tmp_path / "prefix"
    data = prefix / "external" / "corpus"
    data.mkdir(parents=True)
    (data / "part-0.jsonl").write_text('{"text": "hi"}\n')
    ran = []
    step = StepSpec(
        name="corpus", fn=lambda path: ran.append(path), output_path="external/corpus", adopt=True
    )

    planned = _runner(prefix).plan([step]).steps[0]
    assert planned.state == PlanState.RUN_NEW and planned.reason.startswith("adopt:")
    _runner(prefix).run([step])
    assert ran == []
    assert (data / "part-0.jsonl").read_text() == '{"text": "hi"}\n'
    assert _status(data)["state"] == "SUCCESS"
    info = json.loads((data / ".executor_info").read_text())
    assert info["adopted"] is True
    assert [f["path"] for f in info["manifest"]] == ["part-0.jsonl"]
    assert _runner(prefix).plan([step]).steps[0].state == PlanState.CACHED


def test_adopt_runs_fn_when_the_folder_is_missing(tmp_path):
    prefix = tmp_path / "prefix"
    step = StepSpec(name="corpus", fn=_write("made.txt"), output_path="corpus", adopt=True)
    _runner(prefix).run([step])
    assert (prefix / "corpus" / "made.txt").read_text() == "made by the step"
    assert "adopted" not in json.loads((prefix / "corpus" / ".executor_info").read_text())


def test_the_lazy_helpers_pass_adopt_to_their_step(tmp_path):
    from marin.execution.lazy import lower
    from marin.experiment.data import tokenized, train_tokenizer

    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"text": "a"}\n')
    tok = train_tokenizer(name="tok", paths=[str(corpus)], vocab_size=300, adopt=True)
    assert lower(tok).adopt is True
    data = tokenized(name="tokenized/c", tokenizer=tok, paths=[str(corpus)], adopt=True)
    assert lower(data).adopt is True
    assert lower(tokenized(name="tokenized/d", tokenizer=tok, paths=[str(corpus)])).adopt is False


def test_train_lm_and_evaluate_pass_adopt_to_their_step(tmp_path):
    from marin.execution.lazy import lower
    from marin.experiment.data import tokenized
    from marin.experiment.evaluate import evaluate
    from marin.experiment.train import train_lm
    from marin.training.models import LlamaConfig
    from marin.training.optim import AdamConfig

    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"text": "a"}\n')
    data = tokenized(name="tokenized/c", tokenizer="gpt2", paths=[str(corpus)])
    model = train_lm(
        name="m",
        model=LlamaConfig(hidden_dim=32, intermediate_dim=64, num_layers=1, num_heads=2),
        optimizer=AdamConfig(),
        datasets={data: 1.0},
        batch_size=2,
        seq_len=16,
        num_train_steps=1,
        adopt=True,
    )
    assert lower(model).adopt is True
    assert lower(evaluate("e", model, prompts=["x"], adopt=True)).adopt is True
    assert lower(evaluate("e2", model, prompts=["x"])).adopt is False


def test_a_folder_that_appears_after_planning_is_still_refused_under_the_lease(tmp_path):
    prefix = tmp_path / "prefix"

    def someone_else_writes(path):  # runs before `later` does: the folder did not exist at plan time
        (prefix / "later").mkdir()
        (prefix / "later" / "theirs.txt").write_text("arrived late")

    first = StepSpec(name="first", fn=someone_else_writes)
    ran = []
    later = StepSpec(name="later", fn=lambda path: ran.append(path), deps=[first], output_path="later")
    assert _runner(prefix).plan([later]).of(later).state == PlanState.RUN_NEW
    with pytest.raises(StepFailedError) as err:
        _runner(prefix).run([later])
    assert "OutputConflictError" in str(err.value) and f"{prefix}/later" in str(err.value)
    assert ran == []
    assert sorted(p.name for p in (prefix / "later").iterdir()) == ["theirs.txt"]
