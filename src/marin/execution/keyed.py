"""What enters a step's key: a config's fields, less the execution-only ones and those left at their default.

A lazy handle's config is a frozen dataclass, and `hash_attrs_of(config)` is the step's
`hash_attrs`. Two rules decide which fields enter:

- A field that changes how a step runs but never what it writes (worker counts, a backend, a batch
  size that does not change the numbers) is marked once, where it is declared:
  `workers: int = field(default=4, metadata=NOT_KEY)`. It never enters.
- A field left at its declared default stays out of the key. So adding an option to a config (a
  field with a default that keeps today's behaviour) never changes an existing key, and only the
  steps that set it get new ones. Its one consequence: changing a default's value is a breaking
  change. Configs that left the field at its default keep their keys while what they compute
  changes, so such a change must come with a key-format bump of that config: add, or raise, a
  constant field (`key_format: int = field(default=2, init=False)`, as `TokenizeConfig`'s
  `format_version`), which changes every key of the config.

A field the user cannot set (`init=False`) is the config's constant, not an option: it always
enters (that is what makes the bump work). A class whose keys were published before the second rule
names the defaulted fields those keys spell out in `KEYED_AT_DEFAULT: ClassVar[tuple[str, ...]]`:
they enter at any value, so the outputs filed under those keys stay valid; a field added since is
not listed, and follows the rule. Taking a name out of the list is a key-format bump.
A field whose key form is not its value says so where it is declared: `field(metadata=key_as(fn))`
keys it as `fn(value)` (and is at its default when `fn` gives the default's form).

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

__all__ = ["KEYED_AT_DEFAULT", "NOT_KEY", "hash_attrs_of", "is_key_field", "key_as", "key_fields", "key_json"]

NOT_KEY: Mapping[str, Any] = {"key": False}  # `field(metadata=NOT_KEY)`: execution only, not in the key
KEYED_AT_DEFAULT = "KEYED_AT_DEFAULT"  # the class attribute naming fields keyed even at their default


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
    """A dataclass's key fields by name, each as key JSON, less those left at their default (see the
    module docstring): what `describe()` returns when a config records its key form for other
    readers too (stats files) but holds nothing beyond its fields."""
    where = where or type(config).__name__
    always = _keyed_at_default(type(config))
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        if not is_key_field(f):
            continue
        name = f"{where}.{f.name}"
        value = key_json(_field_key(f, getattr(config, f.name)), name)
        if f.init and f.name not in always and _is_default(f, value, name):
            continue
        out[f.name] = value
    return out


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


def _is_default(field: dataclasses.Field, value: Any, where: str) -> bool:
    """Whether `value` (a field's key JSON) is the key JSON of the field's declared default."""
    if field.default is not dataclasses.MISSING:
        default = field.default
    elif field.default_factory is not dataclasses.MISSING:
        default = field.default_factory()
    else:
        return False
    return _same_json(value, key_json(_field_key(field, default), where))


def _same_json(a: Any, b: Any) -> bool:
    """JSON equality as keys see it: `1 == 1.0`, but a bool is never a number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


_always_memo: dict[type, frozenset[str]] = {}


def _keyed_at_default(cls: type) -> frozenset[str]:
    """The field names `cls` keys even at their default; a name that is no field of it is an error."""
    known = _always_memo.get(cls)
    if known is not None:
        return known
    names = frozenset(getattr(cls, KEYED_AT_DEFAULT, ()))
    unknown = names - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise StepDefinitionError(
            f"{cls.__name__}.{KEYED_AT_DEFAULT} names {sorted(unknown)}, which are not fields of it"
        )
    _always_memo[cls] = names
    return names
