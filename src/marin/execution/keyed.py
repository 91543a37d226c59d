"""One rule for what enters a step's key: every field of its config except those marked execution-only.

A lazy handle's config is a frozen dataclass. A field that changes how a step runs but never what
it writes (worker counts, a backend, a batch size that does not change the numbers) is marked once,
where it is declared:

    workers: int = field(default=4, metadata=NOT_KEY)

and `hash_attrs_of(config)` is the step's `hash_attrs`. A new field enters the key unless it is
marked, so adding a field never means rediscovering the policy. A field whose key form is not its
value says so where it is declared too: `field(metadata=key_as(fn))` keys it as `fn(value)`.

Values become JSON like this:
- a value with a `describe()` method is keyed by what it returns: a config whose key holds more or
  less than its fields (a source that names hub-only fields only for hub datasets, a filter that
  records its library's version, computed LSH bands) says so there, once;
- a dataclass by its own fields, under the same rule (nested configs mark their own fields);
- enums by their value, tuples and lists as lists, mappings as objects; str, int, float, bool and
  None as they are. Anything else is a StepDefinitionError naming the field.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from typing import Any

from marin.execution.errors import StepDefinitionError

__all__ = ["NOT_KEY", "hash_attrs_of", "is_key_field", "key_as", "key_fields", "key_json"]

NOT_KEY: Mapping[str, Any] = {"key": False}  # `field(metadata=NOT_KEY)`: execution only, not in the key


def key_as(fn: Callable[[Any], Any]) -> Mapping[str, Any]:
    """Field metadata: the field enters the key as `fn(value)` (then made JSON like any value)."""
    return {"key": fn}


def is_key_field(field: dataclasses.Field) -> bool:
    """Whether a dataclass field enters the key (all do unless marked `metadata=NOT_KEY`)."""
    return field.metadata.get("key", True) is not False


def hash_attrs_of(config: Any) -> dict[str, Any]:
    """A step's `hash_attrs`: `config`'s key JSON (its `describe()`, or its key fields by name)."""
    value = key_json(config, type(config).__name__)
    if not isinstance(value, dict):
        raise StepDefinitionError(
            f"{type(config).__name__} is not a config: its key form is a {type(value).__name__}, not an object"
        )
    return value


def key_fields(config: Any, where: str | None = None) -> dict[str, Any]:
    """A dataclass's key fields by name, each as key JSON: what `describe()` returns when a config
    records its key form for other readers too (stats files) but holds nothing beyond its fields."""
    where = where or type(config).__name__
    return {
        f.name: key_json(_field_key(f, getattr(config, f.name)), f"{where}.{f.name}")
        for f in dataclasses.fields(config)
        if is_key_field(f)
    }


def key_json(value: Any, where: str = "value") -> Any:
    """The JSON form of `value` in a key (see the module docstring); `where` names it in errors."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, str):
        return str(value)
    describe = getattr(value, "describe", None)
    if callable(describe) and not isinstance(value, type):
        return key_json(describe(), f"{where}.describe()")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return key_fields(value, where)
    if isinstance(value, Mapping):
        return {str(k): key_json(v, f"{where}[{k!r}]") for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [key_json(v, f"{where}[{i}]") for i, v in enumerate(value)]
    raise StepDefinitionError(
        f"{where} is a {type(value).__name__}, which has no key form; make it a dataclass, give it a "
        "describe() method, or mark the field execution-only with field(metadata=NOT_KEY)"
    )


def _field_key(field: dataclasses.Field, value: Any) -> Any:
    how = field.metadata.get("key", True)
    return how(value) if callable(how) else value
