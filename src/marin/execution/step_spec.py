"""StepSpec: the declaration of one step of a pipeline. Declaring a step runs nothing."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from marin.execution.errors import StepDefinitionError

if TYPE_CHECKING:
    from fray.cluster import ResourceConfig


@dataclass(frozen=True, eq=False)
class StepSpec:
    """One step: `fn` writes its output under the step's output path.

    `fn` takes no argument or one (the output path). `hash_attrs` are the JSON parameters that,
    with the name, the dependencies' keys and the code version, make the step's cache key.
    `output_path`, when given, is relative to the runner's prefix; otherwise the output lives at
    `{prefix}/{name}-{key[:8]}`. `version` replaces the code fingerprint when given.
    Steps compare by identity; two specs with the same key are the same work.
    """

    name: str
    fn: Callable[..., Any]
    deps: Sequence[StepSpec] = ()
    hash_attrs: Mapping[str, Any] = field(default_factory=dict)
    output_path: str | None = None
    version: str | None = None
    resources: ResourceConfig | None = None

    def __post_init__(self) -> None:
        _check_relative_path(self.name, "name", self.name)
        if self.output_path is not None:
            _check_relative_path(self.name, "output_path", self.output_path)
        if not callable(self.fn):
            raise StepDefinitionError(f"step {self.name!r}: fn must be callable, got {type(self.fn).__name__}")
        deps = tuple(self.deps)
        for dep in deps:
            if not isinstance(dep, StepSpec):
                raise StepDefinitionError(
                    f"step {self.name!r}: every dependency must be a StepSpec (lower() lazy handles first), "
                    f"got {type(dep).__name__}"
                )
        object.__setattr__(self, "deps", deps)
        if not isinstance(self.hash_attrs, Mapping):
            raise StepDefinitionError(f"step {self.name!r}: hash_attrs must be a mapping of JSON values")
        check_json_value(self.hash_attrs, f"step {self.name!r}: hash_attrs")
        if self.version is not None and not isinstance(self.version, str):
            raise StepDefinitionError(f"step {self.name!r}: version must be a string, got {self.version!r}")

    def __repr__(self) -> str:
        return f"StepSpec(name={self.name!r}, deps={[d.name for d in self.deps]})"


def _check_relative_path(step: str, field_name: str, value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        raise StepDefinitionError(f"step {step!r}: {field_name} must be a non-empty string, got {value!r}")
    if value.startswith("/") or "://" in value or (len(value) > 1 and value[1] == ":"):
        raise StepDefinitionError(
            f"step {step!r}: {field_name} {value!r} is absolute; give a path relative to the prefix "
            "(set the prefix with StepRunner(prefix=...) or MARIN_PREFIX)"
        )
    parts = value.replace("\\", "/").split("/")
    if ".." in parts or any(p == "" for p in parts[:-1]):
        raise StepDefinitionError(
            f"step {step!r}: {field_name} {value!r} escapes the prefix or has empty segments; "
            "use a plain relative path such as 'tokenized/tinystories'"
        )


def check_json_value(value: Any, where: str) -> None:
    """Raise StepDefinitionError naming the field path if `value` is not plain JSON."""
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise StepDefinitionError(f"{where} is {value!r}; NaN and infinities are not JSON")
        return
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                raise StepDefinitionError(f"{where} has key {k!r}; JSON object keys must be strings")
            check_json_value(v, f"{where}.{k}")
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            check_json_value(v, f"{where}[{i}]")
        return
    raise StepDefinitionError(
        f"{where} is a {type(value).__name__} ({value!r:.80}); hash_attrs take JSON values only "
        "(str, int, float, bool, None, lists and dicts of them): convert it, e.g. str(path) or dataclasses.asdict(cfg)"
    )
