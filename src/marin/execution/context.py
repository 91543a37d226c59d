"""The context a step function runs in: its output path and its dependencies' output paths.

The runner sets it around each call of a step's `fn`, in whatever process runs the step, so a
step built by a library helper (tokenize, train) can find its inputs without knowing the prefix.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from marin.execution.errors import MarinError

if TYPE_CHECKING:
    from marin.execution.step_spec import StepSpec


@dataclass(frozen=True)
class StepContext:
    """Where the running step writes (`output_path`) and where each dependency wrote, by name."""

    step_name: str
    output_path: str
    prefix: str
    dep_paths: Mapping[str, str] = field(default_factory=dict)

    def path_of(self, dep: StepSpec | str) -> str:
        """The output path of a dependency of the running step, given the spec or its name."""
        name = dep if isinstance(dep, str) else dep.name
        try:
            return self.dep_paths[name]
        except KeyError:
            raise MarinError(
                f"step {self.step_name!r} asked for the output of {name!r}, which is not one of its "
                f"dependencies ({sorted(self.dep_paths)}); add it to the step's deps"
            ) from None


_current: contextvars.ContextVar[StepContext | None] = contextvars.ContextVar(
    "marin_step_context", default=None
)


def current() -> StepContext:
    """The context of the step being executed; an error outside a running step."""
    ctx = _current.get()
    if ctx is None:
        raise MarinError(
            "no step is running here: current() is only valid inside a step's fn run by StepRunner"
        )
    return ctx


@contextmanager
def running(ctx: StepContext) -> Iterator[StepContext]:
    """Make `ctx` the current step context for the duration of the block."""
    token = _current.set(ctx)
    try:
        yield ctx
    finally:
        _current.reset(token)
