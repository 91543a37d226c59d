"""StepSpec validation at declaration: fn's signature, and which names/paths count as absolute."""

from __future__ import annotations

import functools

import pytest

from marin.execution.errors import StepDefinitionError
from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec
from marin.execution.task import accepts_output_path


def _two_args(a, b):
    return None


def test_fn_taking_two_positional_arguments_is_rejected_naming_the_step():
    with pytest.raises(StepDefinitionError, match=r"step 'pair'.*\(a, b\)"):
        StepSpec(name="pair", fn=lambda a, b: None)
    with pytest.raises(StepDefinitionError, match="step 'pair'"):
        StepSpec(name="pair", fn=_two_args)


def test_fn_with_a_required_keyword_only_argument_is_rejected():
    def needs_flag(path, *, flag):
        return None

    with pytest.raises(StepDefinitionError, match="step 'kw'.*flag"):
        StepSpec(name="kw", fn=needs_flag)


def test_fn_with_zero_or_one_required_argument_is_accepted():
    StepSpec(name="none", fn=lambda: None)
    StepSpec(name="one", fn=lambda path: None)
    StepSpec(name="bound", fn=functools.partial(_two_args, 1))
    StepSpec(name="extra", fn=lambda path, n=3, *rest, **opts: None)
    StepSpec(name="builtin", fn=dict)


def test_only_a_required_positional_parameter_receives_the_output_path(tmp_path):
    def defaulted(x=3):
        return {"x": x}

    def takes_path(path):
        return {"got_path": isinstance(path, str)}

    def star_args(*args):
        return {"n": len(args)}

    assert [accepts_output_path(f) for f in (defaulted, takes_path, star_args)] == [False, True, False]
    steps = [StepSpec(name=f.__name__, fn=f) for f in (defaulted, takes_path, star_args)]
    StepRunner(prefix=str(tmp_path), progress=False).run(steps)
    results = {}
    for artifact in tmp_path.glob("*/.artifact.json"):
        results[artifact.parent.name.rsplit("-", 1)[0]] = artifact.read_text()
    assert '"x":3' in results["defaulted"].replace(" ", "")
    assert '"got_path":true' in results["takes_path"].replace(" ", "")
    assert '"n":0' in results["star_args"].replace(" ", "")


@pytest.mark.parametrize("name", ["a:b", "eval:mmlu", "tokenized/x:y", "ab:/c"])
def test_a_colon_in_a_name_is_not_a_drive(name):
    assert StepSpec(name=name, fn=lambda: None).name == name


@pytest.mark.parametrize("path", ["C:\\data", "c:/data", "C:", "/abs", "gs://bucket/x", "\\\\server\\share"])
def test_absolute_paths_and_drives_are_rejected(path):
    with pytest.raises(StepDefinitionError, match="absolute"):
        StepSpec(name="s", fn=lambda: None, output_path=path)
