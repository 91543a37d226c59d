"""Lazy handles and `lower()`: experiment helpers return handles; `lower` turns them into StepSpecs.

A handle is any hashable object with a `to_step_spec()` method that builds its StepSpec, lowering
its own dependencies with `lower()`. Lowering is memoised, so one handle used by several
downstream steps becomes one StepSpec object, and lowering touches no file.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol, runtime_checkable

from marin.execution.step_spec import StepSpec


@runtime_checkable
class LazyStep(Protocol):
    """What `lower()` accepts besides a StepSpec."""

    def to_step_spec(self) -> StepSpec: ...


_lowered: dict[Any, StepSpec] = {}
_lock = threading.RLock()


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
            spec = obj.to_step_spec()
            if not isinstance(spec, StepSpec):
                raise TypeError(f"{type(obj).__name__}.to_step_spec() returned {type(spec).__name__}, not StepSpec")
            _lowered[obj] = spec
        return spec
