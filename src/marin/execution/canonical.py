"""Canonical JSON values: one spelling per value, so equal parameters always give equal keys.

- A float that is a whole number (and exactly representable, |x| <= 2**53) becomes an int:
  `1.0` and `1` are one value. `True` stays a bool, apart from `1`.
- Strings (values and keys) are put in Unicode NFC: a composed and a decomposed "é" are one string.
- Tuples become lists; mappings become dicts.

NaN and infinities are not JSON and are refused.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Mapping
from typing import Any

from marin.execution.errors import StepDefinitionError

_EXACT_INT_LIMIT = 2.0**53


def canonical_json_value(value: Any, where: str) -> Any:
    """`value` in canonical form (the same object when already canonical).

    Raises StepDefinitionError naming the field path (`where`) when `value` is not plain JSON.
    """
    out = _canonical(value, where)
    return value if out is _SAME else out


def plain_json_or_none(value: Any) -> Any:
    """`value` in canonical form, or `_NOT_JSON` when it is not plain JSON (never raises)."""
    try:
        out = _canonical(value, "")
    except _NotJson:
        return NOT_JSON
    return value if out is _SAME else out


class _NotJson(StepDefinitionError):
    pass


NOT_JSON = object()
_SAME = object()  # "unchanged": lets a walk return its input without copying it


def _canonical(value: Any, where: str) -> Any:
    kind = type(value)
    if kind is int or kind is bool or value is None:
        return _SAME
    if kind is str:
        return (
            _SAME
            if value.isascii() or unicodedata.is_normalized("NFC", value)
            else unicodedata.normalize("NFC", value)
        )
    if kind is float:
        if not math.isfinite(value):
            raise _NotJson(f"{where} is {value!r}; NaN and infinities are not JSON")
        if value.is_integer() and abs(value) <= _EXACT_INT_LIMIT:
            return int(value)
        return _SAME
    if kind is dict or isinstance(value, Mapping):
        changed = kind is not dict
        items = []
        for k, v in value.items():
            if type(k) is not str:
                raise _NotJson(f"{where} has key {k!r}; JSON object keys must be strings")
            ck = _SAME if k.isascii() else _canonical(k, where)
            vkind = type(v)
            cv = _SAME if vkind is int or vkind is bool or v is None else _canonical(v, f"{where}.{k}")
            if ck is not _SAME or cv is not _SAME:
                changed = True
            items.append((k if ck is _SAME else ck, v if cv is _SAME else cv))
        return dict(items) if changed else _SAME
    if isinstance(value, (list, tuple)):
        changed = type(value) is not list
        out = []
        for i, v in enumerate(value):
            cv = _canonical(v, f"{where}[{i}]")
            if cv is not _SAME:
                changed = True
            out.append(v if cv is _SAME else cv)
        return out if changed else _SAME
    if isinstance(value, (str, int, float)):  # subclasses (an IntEnum, a str Enum): their plain value
        plain = (
            str.__str__(value)
            if isinstance(value, str)
            else int(value)
            if isinstance(value, int)
            else float(value)
        )
        inner = _canonical(plain, where)
        return plain if inner is _SAME else inner
    raise _NotJson(
        f"{where} is a {type(value).__name__} ({value!r:.80}); hash_attrs take JSON values only "
        "(str, int, float, bool, None, lists and dicts of them): convert it, e.g. str(path) or dataclasses.asdict(cfg)"
    )
