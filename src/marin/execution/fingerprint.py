"""Code fingerprints: what a step's function is, independent of the name its module was imported under.

A function's fingerprint is a sha256 over:
- its normalized code: the AST of its source without docstrings, so comments, blank lines and
  formatting never count but a real edit does (compiled code when there is no source);
- the values it captures (closure cells) that are plain JSON, and the fingerprint of each captured
  function;
- the module-level names its code reads (its own and its nested functions' and comprehensions')
  whose values are plain JSON constants;
- the fingerprints of the functions of its own package that it reads by module-level name (calls,
  mostly), recursively; a cycle is closed by the callee's normalized code.

Never part of it: the module's import name, the file's path, line numbers. Values are canonical
(`canonical.py`): `1` and `1.0` are one value, strings are NFC.

Speed: the normalized-code digest and the names a code object reads are computed once per code
object (`_code_info`), so 10,000 closures made by one factory parse their source once. The memo
is checked against the source file's (mtime_ns, size) once per plan (`new_plan_memo`), so a
file edited and re-imported is re-read. Only the per-closure part (captured values, globals read)
is hashed per step.
"""

from __future__ import annotations

import ast
import dis
import functools
import hashlib
import inspect
import json
import linecache
import os
import textwrap
from collections.abc import Callable
from types import CodeType, FunctionType, MethodType, ModuleType
from typing import Any

import orjson

from marin.execution.canonical import NOT_JSON, plain_json_or_none

_SORTED = orjson.OPT_SORT_KEYS
_LOAD_GLOBAL_OPS = frozenset(dis.opmap[n] for n in ("LOAD_GLOBAL", "LOAD_NAME") if n in dis.opmap)


class _CodeInfo:
    """The per-code-object part of a fingerprint, memoized."""

    __slots__ = ("code", "digest", "globals_read", "stamp", "generation")

    def __init__(
        self, code: CodeType, digest: str, globals_read: tuple[str, ...], stamp: Any, generation: int
    ):
        self.code = code  # held, so the id it is keyed by is never reused while memoized
        self.digest = digest
        self.globals_read = globals_read
        self.stamp = stamp
        self.generation = generation


_code_memo: dict[int, _CodeInfo] = {}
_object_memo: dict[int, tuple[Any, str]] = {}
_unit_memo: dict[str, str] = {}
_generation = 0


class PlanMemo:
    """Memos valid for one plan: fingerprints of functions read as globals, and the canonical forms
    of non-scalar global values (a global can be rebound between plans, not during one)."""

    __slots__ = ("callees", "values", "globals")

    def __init__(self) -> None:
        self.callees: dict[int, tuple[Any, str]] = {}
        self.values: dict[int, tuple[Any, Any]] = {}
        # (code, its module namespace) -> what the globals it reads add: the same for every closure
        # a factory made, so a plan of 10,000 of them reads those globals once.
        self.globals: dict[tuple[int, int], tuple[CodeType, dict, dict[str, Any] | None]] = {}


def new_plan_memo() -> PlanMemo:
    """Start a planning pass: memoized code is re-checked against its source file once more."""
    global _generation
    _generation += 1
    return PlanMemo()


def code_fingerprint(fn: Callable[..., Any], memo: PlanMemo | None = None) -> str:
    """The fingerprint of a step function (see the module docstring); `memo`: one plan's.

    A `functools.partial` is its function plus its bound arguments when those are plain JSON;
    otherwise the bound arguments are left out and the step's `hash_attrs` or `version` must carry
    them (lazy handles put every parameter in `hash_attrs`). A callable object or class is the
    normalized source of its class.
    """
    return _fingerprint(fn, frozenset(), memo or PlanMemo())[0]


def _fingerprint(fn: Any, active: frozenset[int], memo: PlanMemo) -> tuple[str, bool]:
    """(fingerprint, whether a cycle was cut on the way: such a result is not memoized)."""
    kind = type(fn)
    if kind is not FunctionType and isinstance(fn, functools.partial):
        base, cut = _fingerprint(fn.func, active, memo)
        bound = plain_json_or_none({"args": list(fn.args), "kwargs": dict(fn.keywords)})
        if bound is NOT_JSON:
            return base, cut
        return _hash(base, bound), cut
    if kind is MethodType:
        fn = fn.__func__
    code = getattr(fn, "__code__", None)
    if type(code) is not CodeType:
        return _object_digest(fn), False
    info = _code_info(code)
    active = active | {id(code)}
    parts: dict[str, Any] = {}
    cut = False
    closure = fn.__closure__
    if closure:
        captured = []
        for name, cell in zip(code.co_freevars, closure, strict=False):
            try:
                captured.append((name, cell.cell_contents))  # read every time: a cell can be rebound
            except ValueError:  # a cell not yet bound
                continue
        cut |= _add_parts(parts, "captured", captured, active, memo, False, code)
    if info.globals_read:
        namespace = fn.__globals__
        known = memo.globals.get((id(code), id(namespace)))
        if known is not None and known[0] is code and known[1] is namespace:
            if known[2] is not None:
                parts["globals"] = known[2]
        else:
            read = [
                (name, namespace[name]) for name in info.globals_read if name in namespace
            ]  # else: a builtin
            globals_cut = _add_parts(parts, "globals", read, active, memo, True, code)
            if not globals_cut:
                memo.globals[(id(code), id(namespace))] = (
                    code,
                    namespace,
                    parts.get("globals"),
                )  # only cut-free
            cut |= globals_cut
    if not parts:
        return info.digest, cut
    return _hash(info.digest, parts), cut


def _add_parts(parts, field, named_values, active, memo, same_unit_only, code) -> bool:
    """Put what each (name, value) adds to the fingerprint under parts[field]; whether a cycle was cut."""
    out: dict[str, Any] = {}
    cut = False
    for name, value in named_values:
        part, part_cut = _value_part(value, active, memo, same_unit_only, code)
        cut |= part_cut
        if part is not None:
            out[name] = part
    if out:
        parts[field] = out
    return cut


def _value_part(value: Any, active: frozenset[int], memo: PlanMemo, same_unit_only: bool, unit_of: CodeType):
    """What a captured or global value adds to a fingerprint: ({"value": v} | {"fn": fp} | None, cut)."""
    kind = type(value)
    if kind is str and value.isascii() or kind is int or kind is bool or value is None:
        return {"value": value}, False
    if kind is str or kind is float:
        canonical = plain_json_or_none(value)
        return ({"value": canonical} if canonical is not NOT_JSON else None), False
    if kind is ModuleType or kind is type:
        return None, False
    if kind is FunctionType or kind is MethodType or kind is functools.partial:
        target = value.__func__ if kind is MethodType else value
        target = target.func if kind is functools.partial else target
        target_code = getattr(target, "__code__", None)
        if same_unit_only and (not isinstance(target_code, CodeType) or not _same_unit(target_code, unit_of)):
            return None, False
        if isinstance(target_code, CodeType) and id(target_code) in active:
            return {"cycle": _code_info(target_code).digest}, True
        known = memo.callees.get(id(value))
        if known is not None and known[0] is value:
            return {"fn": known[1]}, False
        fp, cut = _fingerprint(value, active, memo)
        if not cut:
            memo.callees[id(value)] = (value, fp)
        return {"fn": fp}, cut
    if kind is dict or kind is list or kind is tuple:
        known = memo.values.get(id(value))
        if known is not None and known[0] is value:
            canonical = known[1]
        else:
            canonical = plain_json_or_none(value)
            memo.values[id(value)] = (value, canonical)
        return ({"value": canonical} if canonical is not NOT_JSON else None), False
    return None, False


def _hash(digest: str, parts: Any) -> str:
    try:
        encoded = orjson.dumps(parts, option=_SORTED)
    except TypeError:  # an int past 64 bits, which orjson refuses: the standard library's JSON takes it
        encoded = json.dumps(parts, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(digest.encode() + encoded).hexdigest()


def _code_info(code: CodeType) -> _CodeInfo:
    info = _code_memo.get(id(code))
    if info is not None and info.code is code:
        if info.generation == _generation:
            return info
        if _file_stamp(code.co_filename) == info.stamp:
            info.generation = _generation
            return info
    stamp = _file_stamp(code.co_filename)
    info = _CodeInfo(code, _normalized_digest(code), _globals_read(code), stamp, _generation)
    _code_memo[id(code)] = info
    return info


def _file_stamp(filename: str) -> tuple[int, int] | None:
    try:
        st = os.stat(filename)
    except (OSError, ValueError):
        return None
    return st.st_mtime_ns, st.st_size


def _normalized_digest(code: CodeType) -> str:
    try:
        source = textwrap.dedent(_source_of(code))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError, IndentationError):
        # No parseable source (a lambda inside an expression, code built at runtime):
        # the compiled code, which ignores comments and line numbers.
        text = "code:" + _describe_code(code)
    else:
        _strip_docstrings(tree)
        text = ast.dump(tree, annotate_fields=False, include_attributes=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _source_of(code: CodeType) -> str:
    """The source block of a code object, read straight from its file (what inspect.getsource does,
    without its search of every loaded module for the one that owns the file: 0.1 s cold)."""
    linecache.checkcache(code.co_filename)  # an edited file is read afresh
    lines = linecache.getlines(code.co_filename)
    if not lines or code.co_firstlineno < 1:
        raise OSError(f"no source for {code.co_name}")
    return "".join(inspect.getblock(lines[code.co_firstlineno - 1 :]))


def _globals_read(code: CodeType) -> tuple[str, ...]:
    """The module-level names read by `code` and the code nested in it (inner functions, comprehensions)."""
    names: set[str] = set()
    stack = [code]
    while stack:
        c = stack.pop()
        for ins in dis.get_instructions(c):
            if ins.opcode in _LOAD_GLOBAL_OPS:
                names.add(ins.argval)
        stack.extend(k for k in c.co_consts if isinstance(k, CodeType))
    return tuple(sorted(names))


def _describe_code(code: CodeType) -> str:
    consts = [(_describe_code(c) if isinstance(c, CodeType) else repr(c)) for c in code.co_consts]
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


def _object_digest(fn: Any) -> str:
    """A class, or a callable object (by its class), or a builtin: the normalized source of the class."""
    target = fn if inspect.isclass(fn) else type(fn)
    memo = _object_memo.get(id(target))
    if memo is not None and memo[0] is target:
        return memo[1]
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(target)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        text = f"ref:{getattr(target, '__qualname__', repr(target))}"
        if inspect.isbuiltin(fn):
            text = f"builtin:{getattr(fn, '__qualname__', repr(fn))}"
    else:
        _strip_docstrings(tree)
        text = ast.dump(tree, annotate_fields=False, include_attributes=False)
    digest = hashlib.sha256(text.encode()).hexdigest()
    _object_memo[id(target)] = (target, digest)
    return digest


def _same_unit(a: CodeType, b: CodeType) -> bool:
    """Whether two functions belong to one package: the same file, or the same top-level package
    directory (for a module outside any package: the same directory)."""
    fa, fb = a.co_filename, b.co_filename
    if fa == fb:
        return True
    ua, ub = _unit(fa), _unit(fb)
    return ua != "" and ua == ub


def _unit(filename: str) -> str:
    unit = _unit_memo.get(filename)
    if unit is None:
        unit = ""
        if os.path.isfile(filename):
            unit = os.path.dirname(os.path.abspath(filename))
            while os.path.isfile(os.path.join(unit, "__init__.py")):
                up = os.path.dirname(unit)
                if up == unit or not os.path.isfile(os.path.join(up, "__init__.py")):
                    break
                unit = up
        _unit_memo[filename] = unit
    return unit
