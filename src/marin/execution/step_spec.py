"""StepSpec: the declaration of one step of a pipeline. Declaring a step runs nothing."""

from __future__ import annotations

import inspect
import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import FunctionType
from typing import TYPE_CHECKING, Any

from marin.execution.canonical import canonical_json_value
from marin.execution.errors import StepDefinitionError
from marin.execution.inputs import check_inputs

if TYPE_CHECKING:
    from fray.cluster import ResourceConfig


@dataclass(frozen=True, eq=False, slots=True)
class StepSpec:
    """One step: `fn` writes its output under the step's output path.

    `fn` takes no argument or one (the output path): it is called `fn(output_path)` when it has
    one positional parameter without a default, else `fn()`. `hash_attrs` are the JSON parameters that,
    with the name, the dependencies' keys and the code version, make the step's cache key.
    `output_path`, when given, is relative to the runner's prefix; otherwise the output lives at
    `{prefix}/{name}-{key[:8]}`. `version` replaces the code fingerprint when given.
    `resumable=True` says the step writes only atomic units (checkpoints, shard files) and resumes
    from them: when an attempt with the same key died or failed, its output is kept for the rerun
    instead of cleared (it is not part of the key). `resume_note(output_path) -> str`, for a
    resumable step, says what a rerun would start from by reading its output (a train step:
    "resumes from step 80" or "restarts: no checkpoint"); the plan prints it (not part of the key).
    `inputs` are the external files `fn` reads (local paths, globs, fsspec URLs,
    `hf://datasets/ORG/NAME@REV`): each file's name, size and digest are part of the key, so
    changed data reruns the step (see `marin.execution.inputs`).
    `adopt=True` takes an existing non-empty folder at the output path, one marin did not write, as
    the step's SUCCESS output without running `fn` (not part of the key; see docs/execution.md).
    Steps compare by identity; two specs with the same key are the same work.
    """

    name: str
    fn: Callable[..., Any]
    deps: Sequence[StepSpec] = ()
    hash_attrs: Mapping[str, Any] = field(default_factory=dict)
    output_path: str | None = None
    version: str | None = None
    resources: ResourceConfig | None = None
    resumable: bool = False
    resume_note: Callable[[str], str] | None = None
    inputs: Sequence[str] = ()
    adopt: bool = (
        False  # take an existing non-empty folder at the output path as the SUCCESS output (fn not run)
    )

    def __post_init__(self) -> None:
        _check_relative_path(self.name, "name", self.name)
        if self.output_path is not None:
            _check_relative_path(self.name, "output_path", self.output_path)
        if not callable(self.fn):
            raise StepDefinitionError(
                f"step {self.name!r}: fn must be callable, got {type(self.fn).__name__}"
            )
        _check_signature(self.name, self.fn)
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
        canonical = canonical_json_value(self.hash_attrs, f"step {self.name!r}: hash_attrs")
        if canonical is not self.hash_attrs:
            object.__setattr__(self, "hash_attrs", canonical)
        if self.inputs:
            object.__setattr__(self, "inputs", check_inputs(self.name, self.inputs))
        if self.version is not None and not isinstance(self.version, str):
            raise StepDefinitionError(f"step {self.name!r}: version must be a string, got {self.version!r}")

    def __repr__(self) -> str:
        return f"StepSpec(name={self.name!r}, deps={[d.name for d in self.deps]})"


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_WINDOWS_DRIVE = re.compile(r"[A-Za-z]:([\\/]|$)")


def _signature(fn: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or C callable without one: called with no argument
        return None


def _plain_parameters(fn: Callable[..., Any]) -> tuple[int, int] | None:
    """(required positional, required keyword-only) parameter counts of a plain function, read from
    its code object without building an inspect.Signature or any list (microseconds, and objects for
    the garbage collector to track, per step matter at 10k steps); None for anything else (partials,
    wrapped or builtin callables)."""
    if type(fn) is not FunctionType or "__wrapped__" in fn.__dict__ or "__signature__" in fn.__dict__:
        return None
    code = fn.__code__
    defaults = fn.__defaults__
    kwdefaults = fn.__kwdefaults__  # keyword-only parameters only
    return (
        code.co_argcount - (len(defaults) if defaults else 0),
        code.co_kwonlyargcount - (len(kwdefaults) if kwdefaults else 0),
    )


def takes_output_path(fn: Callable[..., Any]) -> bool:
    """Whether a step's `fn` is called as `fn(output_path)`: it has one positional parameter
    without a default. A function whose positional parameters all have defaults (`def f(x=3)`),
    or that only takes `*args`, is called as `fn()`."""
    plain = _plain_parameters(fn)
    if plain is not None:
        return plain[0] > 0
    sig = _signature(fn)
    if sig is None:
        return False
    return any(p.kind in _POSITIONAL and p.default is p.empty for p in sig.parameters.values())


def _check_signature(step: str, fn: Callable[..., Any]) -> None:
    plain = _plain_parameters(fn)
    if plain is not None and plain[0] <= 1 and plain[1] == 0:
        return  # the usual case, decided without naming the parameters
    sig = _signature(fn)
    if sig is None:
        return
    params = sig.parameters.values()
    required = [p.name for p in params if p.kind in _POSITIONAL and p.default is p.empty]
    keyword_only = [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    if len(required) > 1 or keyword_only:
        raise StepDefinitionError(
            f"step {step!r}: fn takes ({', '.join(required + keyword_only)}), but a step function takes no "
            "argument or one (the output path); bind the others with functools.partial or give them defaults"
        )


# A plain relative path: word characters, dots and dashes in non-empty segments (checked in one call).
_PLAIN_RELATIVE = re.compile(r"[\w.-]+(?:/[\w.-]+)*")


def _check_relative_path(step: str, field_name: str, value: Any) -> None:
    if type(value) is str and _PLAIN_RELATIVE.fullmatch(value) and ".." not in value:
        return  # the usual case; anything else gets the checks below and their messages
    if not isinstance(value, str) or not value.strip():
        raise StepDefinitionError(f"step {step!r}: {field_name} must be a non-empty string, got {value!r}")
    if value.startswith(("/", "\\")) or "://" in value or _WINDOWS_DRIVE.match(value):
        raise StepDefinitionError(
            f"step {step!r}: {field_name} {value!r} is absolute; give a path relative to the prefix "
            "(set the prefix with StepRunner(prefix=...) or MARIN_PREFIX)"
        )
    parts = value.replace("\\", "/").split("/")
    if any(p == "" for p in parts[:-1]):
        raise StepDefinitionError(
            f"step {step!r}: {field_name} {value!r} has empty segments; "
            "use a plain relative path such as 'tokenized/tinystories'"
        )
    if ".." in parts:
        normal = posixpath.normpath("/".join(parts))
        if normal == ".." or normal.startswith("../"):
            raise StepDefinitionError(
                f"step {step!r}: {field_name} {value!r} escapes the prefix (it resolves to {normal!r}, above "
                "it); give a path inside the prefix such as 'tokenized/tinystories'"
            )
        if normal == "." and field_name == "output_path":
            return  # the prefix itself: the plan refuses it, naming the prefix (see output_path_of)
        raise StepDefinitionError(
            f"step {step!r}: {field_name} {value!r} has '..' segments; spell it plainly"
            + (f" as {normal!r}" if normal != "." else ", for example 'tokenized/tinystories'")
        )


def check_json_value(value: Any, where: str) -> None:
    """Raise StepDefinitionError naming the field path if `value` is not plain JSON."""
    canonical_json_value(value, where)
