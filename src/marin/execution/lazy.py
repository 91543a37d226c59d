"""Lazy handles and `lower()`: experiment helpers return handles; `lower` turns them into StepSpecs.

A handle is any hashable object with a `to_step_spec()` method that builds its StepSpec, lowering
its own dependencies with `lower()`. Lowering is memoised, so one handle used by several
downstream steps becomes one StepSpec object, and lowering touches no file.

The library's handles are frozen dataclasses over their configs that extend `StepOptions`: the
step's `name` and the options every step has (`version`, `adopt`, `resources`), declared once here,
with their arguments checked against their fields (`marin.execution.arguments.Checked`).
"""

from __future__ import annotations

import threading
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Protocol, runtime_checkable

from fray.cluster import ResourceConfig
from marin.execution.arguments import TYPE_NAMES, Checked
from marin.execution.errors import DagError
from marin.execution.keyed import NOT_KEY
from marin.execution.step_spec import StepSpec


@runtime_checkable
class LazyStep(Protocol):
    """What `lower()` accepts besides a StepSpec."""

    def to_step_spec(self) -> StepSpec: ...


TYPE_NAMES[LazyStep] = "a step handle"


@dataclass(frozen=True)
class StepOptions(Checked):
    """What every step handle takes besides its own parameters.

    `name` names the step (and its output folder). `version`, when given, stands for the code in the
    key (bump it to rerun after a change the code fingerprint cannot see). `adopt=True` takes an
    existing non-empty folder at the output path as the step's output without running it (see
    StepSpec.adopt). `resources` is what the step asks its cluster for (not part of the key).
    A handle lists StepOptions as its last base class, so that `name` is its first positional field.
    """

    name: str
    _: KW_ONLY
    version: str | None = None
    adopt: bool = False
    resources: ResourceConfig | None = field(default=None, metadata=NOT_KEY)

    def spec_options(self) -> dict[str, Any]:
        """These options as `StepSpec` keywords."""
        return {"name": self.name, "version": self.version, "adopt": self.adopt, "resources": self.resources}


_lowered: dict[Any, StepSpec] = {}
_lock = threading.RLock()
_in_progress: list[Any] = []  # handles being lowered right now, outermost first (guarded by _lock)


def lower(obj: StepSpec | LazyStep) -> StepSpec:
    """Return the StepSpec for a handle (or the StepSpec itself), lowering dependencies recursively."""
    if isinstance(obj, StepSpec):
        return obj
    if not isinstance(obj, LazyStep):
        raise TypeError(
            f"lower() takes a StepSpec or a lazy handle (tokenized(), train_lm(), ...), got {type(obj).__name__}"
        )
    with _lock:
        spec = _lowered.get(obj)
        if spec is None:
            if obj in _in_progress:
                cycle = [_describe(h) for h in _in_progress[_in_progress.index(obj) :]] + [_describe(obj)]
                raise DagError(
                    f"the steps form a cycle: {' -> '.join(cycle)}; a step cannot depend on itself"
                )
            _in_progress.append(obj)
            try:
                spec = obj.to_step_spec()
            finally:
                _in_progress.pop()
            if not isinstance(spec, StepSpec):
                raise TypeError(
                    f"{type(obj).__name__}.to_step_spec() returned {type(spec).__name__}, not StepSpec"
                )
            _lowered[obj] = spec
        return spec


def _describe(handle: Any) -> str:
    name = getattr(handle, "name", None)
    return repr(name) if isinstance(name, str) else type(handle).__name__
