"""Declarations checked against their fields: a misspelt keyword or a wrong type is one clear error.

A frozen dataclass a user builds by hand (a step handle such as `train_lm(...)`, a config such as
`AdamConfig(...)`) inherits `Checked`. Before the dataclass's own `__init__` and `__post_init__`
run, the arguments are bound to its fields, once, generically:

- a keyword that is no field is a `DeclarationError` with a did-you-mean naming the closest field
  (`unknown keyword num_train_step=; did you mean num_train_steps?`);
- too many positional arguments, or a required field left out, name the fields concerned;
- each value is checked against the field's annotation (`learning_rate='3e-4' is a str, expected
  float`), so that no range check further in compares a string with a number.

The type check is deliberately lenient where Python's annotations say less than the code accepts:
an int is a float, a list is a tuple, a string names an enum member by value, and a name only
imported for type checkers (under `TYPE_CHECKING`) matches anything. It never rejects what the
dataclass itself would have accepted.

Unpickling calls `__new__` with no arguments, so an argument-less call is not checked (the
dataclass still reports missing fields itself).
"""

from __future__ import annotations

import builtins
import collections.abc
import dataclasses
import enum
import numbers
import sys
import threading
import types
import typing
from collections.abc import Mapping
from typing import Any, ClassVar

from marin.execution.errors import StepDefinitionError

__all__ = ["TYPE_NAMES", "Checked", "DeclarationError", "check_arguments", "describe_type"]

# How a message names a type whose class name means little to a user (LazyStep: "a step handle").
TYPE_NAMES: dict[Any, str] = {}


class DeclarationError(StepDefinitionError, TypeError):
    """A declaration's arguments do not fit its fields: an unknown keyword, a missing field, a wrong type."""


class Checked:
    """Base of user-built frozen dataclasses: arguments are checked against fields before `__init__`.

    `helper` (a ClassVar) is the name users call it by (`train_lm`), used in messages; a `name`
    argument, when given, names the step too.
    """

    helper: ClassVar[str | None] = None

    def __new__(cls, *args: Any, **kwargs: Any):
        if args or kwargs:
            check_arguments(cls, args, kwargs)
        return super().__new__(cls)


class _Unresolved:
    """An annotation's name that exists only for type checkers: it matches any value."""


class _AnnotationNames(dict):
    """The namespace an annotation string is evaluated in: the module's, then builtins, else unresolved."""

    def __init__(self, module_globals: Mapping[str, Any], class_namespace: Mapping[str, Any]):
        super().__init__(class_namespace)
        self._globals = module_globals

    def __missing__(self, key: str) -> Any:
        if key in self._globals:
            return self._globals[key]
        if hasattr(builtins, key):
            return getattr(builtins, key)
        return _Unresolved


@dataclasses.dataclass(frozen=True)
class _Parameter:
    name: str
    kw_only: bool
    required: bool
    hint: Any  # the resolved annotation; _Unresolved when it cannot be resolved


_parameters: dict[type, tuple[_Parameter, ...]] = {}
_lock = threading.Lock()


def _parameters_of(cls: type) -> tuple[_Parameter, ...]:
    known = _parameters.get(cls)
    if known is None:
        known = tuple(
            _Parameter(
                f.name,
                bool(f.kw_only),
                f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                _resolve(cls, f),
            )
            for f in dataclasses.fields(cls)
            if f.init
        )
        with _lock:
            _parameters[cls] = known
    return known


def _resolve(cls: type, field: dataclasses.Field) -> Any:
    """The field's annotation as an object, evaluated where the class that declared it was defined."""
    hint = field.type
    if not isinstance(hint, str):
        return hint
    owner = next((k for k in cls.__mro__ if field.name in vars(k).get("__annotations__", {})), cls)
    module = sys.modules.get(owner.__module__)
    names = _AnnotationNames(vars(module) if module else {}, vars(owner))
    try:
        return eval(hint, {"__builtins__": {}}, names)  # noqa: S307 - the class's own annotation
    except Exception:  # noqa: BLE001 - an annotation we cannot evaluate is not checked
        return _Unresolved


def _what(cls: type, args: tuple, kwargs: Mapping[str, Any]) -> str:
    """How a message names the declaration: `train_lm 'checkpoints/nano'`, or the class's name."""
    label = getattr(cls, "helper", None) or cls.__name__
    name = kwargs.get("name", args[0] if args and isinstance(args[0], str) else None)
    return f"{label} {name!r}" if isinstance(name, str) and name else label


def check_arguments(cls: type, args: tuple, kwargs: Mapping[str, Any]) -> None:
    """Raise DeclarationError unless `cls(*args, **kwargs)` names only its fields, each with a fitting value."""
    params = _parameters_of(cls)
    positional = [p for p in params if not p.kw_only]
    by_name = {p.name: p for p in params}
    what = _what(cls, args, kwargs)
    if len(args) > len(positional):
        takes = ", ".join(p.name for p in positional) or "none"
        raise DeclarationError(
            f"{what}: takes {len(positional)} positional argument(s) ({takes}) but got {len(args)}; "
            "pass the others by keyword (field=value)"
        )
    given: dict[str, Any] = {}
    for p, value in zip(positional, args, strict=False):
        given[p.name] = value
    for key, value in kwargs.items():
        if key not in by_name:
            raise DeclarationError(f"{what}: unknown keyword {key}=; {_suggest(key, by_name)}")
        if key in given:
            raise DeclarationError(f"{what}: {key} is given twice (by position and by keyword)")
        given[key] = value
    missing = [p.name for p in params if p.required and p.name not in given]
    if missing:
        raise DeclarationError(
            f"{what}: missing {', '.join(f'{m}=' for m in missing)}; give a value for each"
        )
    for key, value in given.items():
        hint = by_name[key].hint
        if not _fits(value, hint):
            raise DeclarationError(f"{what}: {_mismatch(key, value, hint)}")


def _suggest(key: str, by_name: Mapping[str, _Parameter]) -> str:
    import difflib  # only once a mistake is reported: importing it costs every run ~3 ms

    names = [n for n in by_name if not n.startswith("_")]
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    if not close:  # a prefix or a part of a longer name: `steps` for `num_train_steps`
        close = [n for n in names if key in n or n in key][:1]
    if close:
        return f"did you mean {close[0]}?"
    return "it takes " + ", ".join(names)


def _mismatch(key: str, value: Any, hint: Any) -> str:
    """What is wrong, at the innermost element that does not fit (`paths[1]=4.5 is a float, ...`)."""
    inner = _misfit_element(key, value, hint)
    if inner is not None:
        return _mismatch(*inner)
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    choices = _choices(hint)
    if choices is not None and isinstance(value, str | int) and not isinstance(value, bool):
        return f"{key}={shown} is not one of {', '.join(repr(c) for c in choices)}"
    kind = type(value).__name__
    what = "None" if value is None else f"{'an' if kind[0] in 'aeiouAEIOU' else 'a'} {kind}"
    text = f"{key}={shown} is {what}, expected {describe_type(hint)}"
    if isinstance(value, str) and _fits_number(value, hint):
        text += f" (write {value.strip()} without quotes)"
    return text


def _choices(hint: Any) -> tuple | None:
    """The values an enum or Literal annotation allows (None for any other annotation)."""
    if typing.get_origin(hint) is typing.Literal:
        return typing.get_args(hint)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return tuple(m.value for m in hint)
    return None


def _misfit_element(key: str, value: Any, hint: Any) -> tuple[str, Any, Any] | None:
    """(where, element, its annotation) of the first element of a container that does not fit."""
    members = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    for member in members:
        origin, args = typing.get_origin(member), typing.get_args(member)
        if origin in (tuple, list, collections.abc.Sequence) and isinstance(value, (tuple, list)) and args:
            if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
                continue
            for i, item in enumerate(value):
                if not _fits(item, args[0]):
                    return f"{key}[{i}]", item, args[0]
        if origin in (dict, collections.abc.Mapping) and isinstance(value, Mapping) and len(args) == 2:
            for k, item in value.items():
                if not _fits(k, args[0]):
                    return f"{key} key {k!r:.40}", k, args[0]
                if not _fits(item, args[1]):
                    return f"{key}[{k!r:.40}]", item, args[1]
    return None


def _fits_number(text: str, hint: Any) -> bool:
    try:
        number = float(text)
    except ValueError:
        return False
    return _fits(number, hint) or (number.is_integer() and _fits(int(number), hint))


def describe_type(hint: Any) -> str:
    """An annotation as a reader says it: `float`, `int or None`, `tuple of str`, `AdamConfig`."""
    if hint is None or hint is type(None):
        return "None"
    named = TYPE_NAMES.get(hint) if isinstance(hint, type) else None
    if named:
        return named
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(dict.fromkeys(describe_type(a) for a in typing.get_args(hint)))
    if origin is typing.Literal:
        return " or ".join(repr(a) for a in typing.get_args(hint))
    if origin is not None:
        args = [a for a in typing.get_args(hint) if a is not Ellipsis]
        name = getattr(origin, "__name__", str(origin))
        if origin in (tuple, list, collections.abc.Sequence) and args:
            return f"{name} of {describe_type(args[0])}"
        return name
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return " or ".join(repr(m.value) for m in hint)
    return getattr(hint, "__name__", str(hint))


def _fits(value: Any, hint: Any) -> bool:
    """Whether `value` fits the annotation `hint`; True whenever the annotation cannot tell."""
    if hint is Any or hint is _Unresolved or hint is object:
        return True
    if hint is None or hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, a) for a in typing.get_args(hint))
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    if origin is typing.ClassVar:
        return True
    if origin is not None:
        return _fits_generic(value, origin, typing.get_args(hint))
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if hint in (tuple, list):
        return isinstance(value, (tuple, list))
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return isinstance(value, hint) or value in {m.value for m in hint}
    if hint is collections.abc.Callable:
        return callable(value)
    if isinstance(hint, type):
        try:
            return isinstance(value, hint)
        except TypeError:  # a Protocol that is not runtime-checkable
            return True
    return True  # a TypeVar, a string left unresolved, ...


def _fits_generic(value: Any, origin: Any, args: tuple) -> bool:
    if origin in (tuple, list, collections.abc.Sequence, collections.abc.Iterable):
        if origin is collections.abc.Sequence or origin is collections.abc.Iterable:
            if not isinstance(value, collections.abc.Iterable):
                return False
            if isinstance(value, str | bytes) or not isinstance(value, (list, tuple)):
                return True  # leave a string, a generator, a set to the field's own check
        elif not isinstance(value, (tuple, list)):
            return False
        if not args:
            return True
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            return len(value) == len(args) and all(_fits(v, a) for v, a in zip(value, args, strict=True))
        return all(_fits(v, args[0]) for v in value)
    if origin in (dict, collections.abc.Mapping):
        if not isinstance(value, collections.abc.Mapping):
            return False
        if len(args) != 2:
            return True
        return all(_fits(k, args[0]) and _fits(v, args[1]) for k, v in value.items())
    if origin is collections.abc.Callable:
        return callable(value)
    if origin is type:
        return isinstance(value, type)
    try:
        return isinstance(value, origin)
    except TypeError:
        return True
