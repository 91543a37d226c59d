"""Cache keys: a sha256 over the canonical JSON of a step's name, hash_attrs, dependencies and code.

The key record is what gets hashed, and it is stored in `.executor_info`, so a later plan can say
field by field what changed (`diff_key_records`). The code part is the explicit `version` when one
is given, otherwise a fingerprint of the function's normalized source: its AST without docstrings,
so comments and formatting never change a key but a real edit does. Keys never mention a storage
location, so moving the prefix keeps every cache.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import textwrap
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from marin.execution.errors import StepDefinitionError

_SORTED = orjson.OPT_SORT_KEYS


def canonical_json(value: Any) -> bytes:
    """JSON with sorted keys and no whitespace: equal values give equal bytes."""
    return orjson.dumps(value, option=_SORTED)


def key_record(
    name: str,
    hash_attrs: Mapping[str, Any],
    dep_keys: Sequence[tuple[str, str]],
    version: str | None,
    fingerprint: str | None,
) -> dict[str, Any]:
    """The dict a step's key is the hash of. `dep_keys` is (name, key) per dependency, in order."""
    code = {"version": version} if version is not None else {"fingerprint": fingerprint}
    return {"name": name, "hash_attrs": hash_attrs, "deps": [list(d) for d in dep_keys], "code": code}


def key_of(record: Mapping[str, Any]) -> str:
    """The sha256 hex digest of the canonical JSON of a key record."""
    try:
        return hashlib.sha256(canonical_json(record)).hexdigest()
    except TypeError as e:  # StepSpec validates hash_attrs; this guards records built elsewhere
        raise StepDefinitionError(f"step {record.get('name')!r}: key record is not JSON: {e}") from None


_fingerprints: dict[int, tuple[Callable, str]] = {}
_fingerprint_lock = threading.Lock()


def code_fingerprint(fn: Callable[..., Any]) -> str:
    """A sha256 of the normalized source of `fn` (see the module docstring) and what it captures.

    A `functools.partial` is fingerprinted as its function plus its bound arguments when those are
    plain JSON; otherwise the bound arguments are left out and the step's `hash_attrs` or `version`
    must carry them (lazy handles put every parameter in `hash_attrs`). A closure adds the values of
    its captured variables that are plain JSON, and the fingerprint of each captured function;
    other captured values are left out, like non-JSON partial arguments.
    """
    return _fingerprint(fn, frozenset())


def _fingerprint(fn: Callable[..., Any], active: frozenset[int]) -> str:
    if id(fn) in active:  # a function that captures itself (recursion): its code is already counted
        return "recursive"
    active = active | {id(fn)}
    if isinstance(fn, functools.partial):
        base = _fingerprint(fn.func, active)
        bound = {"args": list(fn.args), "kwargs": dict(fn.keywords)}
        try:
            _require_plain_json(bound)
        except TypeError:
            return base
        return hashlib.sha256(base.encode() + canonical_json(bound)).hexdigest()
    digest = _source_digest(fn)
    captured = _captured_values(fn, active)
    if not captured:
        return digest
    return hashlib.sha256(digest.encode() + canonical_json(captured)).hexdigest()


def _source_digest(fn: Callable[..., Any]) -> str:
    cached = _fingerprints.get(id(fn))
    if cached is not None and cached[0] is fn:
        return cached[1]
    digest = hashlib.sha256(_normalized_code(fn).encode()).hexdigest()
    with _fingerprint_lock:
        _fingerprints[id(fn)] = (fn, digest)  # holds fn, so its id is never reused while cached
    return digest


def _captured_values(fn: Callable[..., Any], active: frozenset[int]) -> dict[str, Any]:
    """Per captured variable of a closure: its value if plain JSON, or the fingerprint of a function.

    Read on every call, not cached: a cell's value can be rebound after the closure is made.
    """
    closure = getattr(fn, "__closure__", None)
    code = getattr(fn, "__code__", None)
    if not closure or code is None:
        return {}
    captured: dict[str, Any] = {}
    for name, cell in zip(code.co_freevars, closure):
        try:
            value = cell.cell_contents
        except ValueError:  # a cell not yet bound
            continue
        if inspect.isfunction(value) or inspect.ismethod(value) or isinstance(value, functools.partial):
            captured[name] = {"fn": _fingerprint(value, active)}
            continue
        try:
            _require_plain_json(value)
        except TypeError:
            continue
        captured[name] = {"value": value}
    return captured


def _require_plain_json(value: Any) -> None:
    if value is None or isinstance(value, (str, bool, int, float)):
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(k)
            _require_plain_json(v)
        return
    if isinstance(value, (list, tuple)):
        for v in value:
            _require_plain_json(v)
        return
    raise TypeError(type(value).__name__)


def _normalized_code(fn: Callable[..., Any]) -> str:
    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) or inspect.isclass(fn) else type(fn)
    try:
        source = textwrap.dedent(inspect.getsource(target))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        # No parseable source (a lambda inside an expression, a builtin, code built at runtime):
        # fall back to the compiled code, which ignores comments but not line numbers.
        code = getattr(target, "__code__", None)
        if code is not None:
            return "code:" + _describe_code(code)
        return f"ref:{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', repr(target))}"
    _strip_docstrings(tree)
    return ast.dump(tree, annotate_fields=False, include_attributes=False)


def _describe_code(code: Any) -> str:
    consts = [(_describe_code(c) if hasattr(c, "co_code") else repr(c)) for c in code.co_consts]
    return repr((code.co_code, consts, code.co_names, code.co_varnames))


def _strip_docstrings(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                node.body = body[1:] or [ast.Pass()]


@dataclass(frozen=True)
class FieldChange:
    """One difference between two key records: `field` went from `old` to `new` (None: absent)."""

    field: str
    old: Any
    new: Any

    def __str__(self) -> str:
        return f"{self.field}: {_short(self.old)} -> {_short(self.new)}"


def _short(value: Any) -> str:
    if value is None:
        return "(none)"
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    if len(text) == 64 and all(c in "0123456789abcdef" for c in text):
        return text[:12]
    return text if len(text) <= 60 else text[:57] + "..."


def diff_key_records(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldChange]:
    """What changed between two key records of the same step: hash_attrs fields, code, dependencies."""
    changes: list[FieldChange] = []
    _diff_values("hash_attrs", old.get("hash_attrs", {}), new.get("hash_attrs", {}), changes)
    old_code, new_code = old.get("code", {}), new.get("code", {})
    if old_code.get("version") != new_code.get("version"):
        changes.append(FieldChange("version", old_code.get("version"), new_code.get("version")))
    if old_code.get("fingerprint") != new_code.get("fingerprint") and "version" not in new_code:
        changes.append(FieldChange("code fingerprint", old_code.get("fingerprint"), new_code.get("fingerprint")))
    old_deps = _dep_map(old.get("deps", []))
    new_deps = _dep_map(new.get("deps", []))
    for name in sorted(old_deps.keys() | new_deps.keys()):
        if old_deps.get(name) != new_deps.get(name):
            changes.append(FieldChange(f"deps.{name}", old_deps.get(name), new_deps.get(name)))
    if old.get("name") != new.get("name"):
        changes.append(FieldChange("name", old.get("name"), new.get("name")))
    return changes


def _dep_map(deps: Sequence[Sequence[str]]) -> dict[str, str]:
    return {str(d[0]): str(d[1]) for d in deps}


def _diff_values(where: str, old: Any, new: Any, out: list[FieldChange]) -> None:
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for k in sorted(old.keys() | new.keys(), key=str):
            if k not in new:
                out.append(FieldChange(f"{where}.{k}", old[k], None))
            elif k not in old:
                out.append(FieldChange(f"{where}.{k}", None, new[k]))
            else:
                _diff_values(f"{where}.{k}", old[k], new[k], out)
    elif canonical_json(old) != canonical_json(new):
        out.append(FieldChange(where, old, new))
