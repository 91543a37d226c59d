"""StepTask: the picklable zero-argument callable a Cluster runs for one step.

It sets the step context (`marin.execution.context.current()`) in whichever process runs it,
calls `fn()` or `fn(output_path)`, and returns the result as JSON. The function travels with
cloudpickle, and only when the cluster actually pickles the task (a thread cluster never does).
"""

from __future__ import annotations

import functools
import pickle
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

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        # One bytes payload, pickled here: the cluster's cloudpickle then only names the loader (its
        # per-object hooks would otherwise visit every part). Lazy: only a cluster that ships tasks
        # to another process pays for cloudpickle.
        from marin.execution.fn_pickle import dumps_fn

        c = self.context
        state = (dumps_fn(self.fn, self._memo), c.step_name, c.output_path, c.prefix, dict(c.dep_paths))
        return _load_task, (pickle.dumps((state, self.pass_path), _PROTOCOL),)

    def __repr__(self) -> str:
        return f"StepTask({self.context.step_name!r} -> {self.context.output_path})"


def _load_task(payload: bytes) -> StepTask:
    """The StepTask that `StepTask.__reduce__` pickled (in the process that runs it)."""
    from marin.execution.fn_pickle import loads_fn

    (fn, name, output_path, prefix, dep_paths), pass_path = pickle.loads(payload)
    task = StepTask.__new__(StepTask)
    task.fn = loads_fn(fn)
    task.context = StepContext(name, output_path, prefix, dep_paths)
    task.pass_path = pass_path
    task._memo = None
    return task


_PROTOCOL = 5
