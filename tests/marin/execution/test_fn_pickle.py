"""A step function pickled for another process: closures of one factory share a template pickled
once per run, and each still arrives with its own captured values, defaults and globals."""

from __future__ import annotations

import pickle
from pathlib import Path

from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec
from marin.execution.task import dumps_fn, loads_fn

SCALE = 10


def make(name: str, offset: int):
    def fn(x: int, bump: int = offset) -> tuple[str, int]:
        """adds"""
        return name, x * SCALE + bump

    return fn


def _travel(fn, memo):
    """Pickled as a task carries it, through bytes, and rebuilt."""
    return loads_fn(pickle.loads(pickle.dumps(dumps_fn(fn, memo))))


def test_closures_of_one_factory_share_a_template_and_keep_their_own_values():
    memo: dict = {}
    first, second = make("a", 1), make("b", 2)
    sent = [dumps_fn(first, memo), dumps_fn(second, memo)]
    assert isinstance(sent[0], tuple) and sent[0][0] == sent[1][0]  # one template, pickled once
    back = [_travel(first, memo), _travel(second, memo)]
    assert [f(3) for f in back] == [("a", 31), ("b", 32)]
    assert back[1].__name__ == "fn" and back[1].__doc__ == "adds" and back[1].__defaults__ == (2,)


def test_a_global_rebound_during_the_run_is_seen_by_later_closures():
    global SCALE
    memo: dict = {}
    assert _travel(make("a", 0), memo)(1) == ("a", 10)
    SCALE = 100
    try:
        assert _travel(make("b", 0), memo)(1) == ("b", 100)
    finally:
        SCALE = 10


def test_an_empty_cell_and_function_attributes_travel():
    def factory():
        def fn():
            return later

        fn.tag = "mine"
        empty = _travel(fn, {})
        later = 5  # noqa: F841 - bound after pickling: the cell was empty then
        return empty

    fn = factory()
    assert fn.tag == "mine"
    try:
        fn()
    except NameError:
        pass
    else:
        raise AssertionError("an empty cell must stay empty")


def test_each_step_of_a_factory_runs_with_its_own_captured_value_on_the_default_cluster(
    tmp_path, monkeypatch
):
    monkeypatch.delenv("MARIN_CLUSTER", raising=False)

    def writer(text: str):
        def fn(output_path):
            Path(output_path, "out.txt").write_text(text)

        return fn

    steps = [StepSpec(name=f"w{i}", fn=writer(f"value {i}"), hash_attrs={"i": i}) for i in range(4)]
    runner = StepRunner(prefix=str(tmp_path), progress=False)
    result = runner.run(steps)
    assert [Path(result.output_path(s), "out.txt").read_text() for s in steps] == [
        f"value {i}" for i in range(4)
    ]


def _helper() -> str:
    return "helper"


def test_a_captured_function_travels_by_value_so_a_process_without_its_module_can_run_it():
    def factory(callee):
        def fn():
            return callee()

        return fn

    local = {}
    exec("def from_main():\n    return 'main'\n", {"__name__": "__main__"}, local)  # as a script defines it
    memo: dict = {}
    assert _travel(factory(_helper), memo)() == "helper"
    template, part = dumps_fn(factory(local["from_main"]), memo)
    assert b"from_main" in part and pickle.loads(part)[0][0]() == "main"  # by value, not by name
