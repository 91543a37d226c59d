"""StepTask: the picklable zero-argument callable a Cluster runs for one step.

It sets the step context (`marin.execution.context.current()`) in whichever process runs it,
calls `fn()` or `fn(output_path)`, and returns the result as JSON. The function travels with
cloudpickle, and only when the cluster actually pickles the task (a thread cluster never does).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from marin.execution.artifact import to_jsonable
from marin.execution.context import StepContext, running
from marin.execution.step_spec import takes_output_path


@functools.lru_cache(maxsize=4096)
def _accepts_path_cached(fn: Callable[..., Any]) -> bool:
    return takes_output_path(fn)


def accepts_output_path(fn: Callable[..., Any]) -> bool:
    """Whether the runner calls `fn(output_path)` rather than `fn()` (the rule is StepSpec's)."""
    try:
        return _accepts_path_cached(fn)
    except TypeError:  # unhashable callable
        return takes_output_path(fn)


class StepTask:
    """Run one step's function inside its StepContext and return its JSON result."""

    def __init__(self, fn: Callable[..., Any], context: StepContext, memo: dict[Any, Any] | None = None):
        """`memo`: shared by a run's tasks, so closures of one factory pickle their shared part once."""
        self.fn = fn
        self.context = context
        self.pass_path = accepts_output_path(fn)
        self._memo = memo

    def __call__(self) -> Any:
        with running(self.context):
            result = self.fn(self.context.output_path) if self.pass_path else self.fn()
        return to_jsonable(result, self.context.step_name)

    def __getstate__(self) -> dict[str, Any]:
        # Lazy: only a cluster that ships tasks to another process pays for cloudpickle.
        from marin.execution.fn_pickle import dumps_fn

        return {"fn": dumps_fn(self.fn, self._memo), "context": self.context, "pass_path": self.pass_path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        from marin.execution.fn_pickle import loads_fn

        self.fn = loads_fn(state["fn"])
        self.context = state["context"]
        self.pass_path = state["pass_path"]
        self._memo = None

    def __repr__(self) -> str:
        return f"StepTask({self.context.step_name!r} -> {self.context.output_path})"
