"""StepTask: the picklable zero-argument callable a Cluster runs for one step.

It sets the step context (`marin.execution.context.current()`) in whichever process runs it,
calls `fn()` or `fn(output_path)`, and returns the result as JSON. The function travels with
cloudpickle, and only when the cluster actually pickles the task (a thread cluster never does).

The function is pickled by `dumps_fn` (and read back by `loads_fn`) so that what a factory's
closures share is pickled once. A closure made by a factory (`make(name)` returning `fn`) is
pickled by value by cloudpickle: its code, the globals it reads and its captured values, about 80 us
a step. Every closure of one factory shares all of that but its captured values (and defaults, name,
attributes). So within a run the first closure of a code object is cloudpickled whole, as a
template, and each later one as its own part only; the other process unpickles the template afresh
(its own globals, as before) and gives it that part. A template is reused only while every global
the code reads is the very object it was pickled with; one that changed makes a new template. (A
global whose contents were mutated during the run, in place, is seen as it was when its template
was pickled.)
"""

from __future__ import annotations

import functools
import pickle
import types
from collections.abc import Callable
from operator import is_not
from typing import Any

from marin.execution.artifact import to_jsonable
from marin.execution.context import StepContext, running
from marin.execution.step_spec import takes_output_path


@functools.lru_cache(maxsize=4096)
def _accepts_path_cached(fn: Callable[..., Any]) -> bool:
    return takes_output_path(fn)


def accepts_output_path(fn: Callable[..., Any]) -> bool:
    """Whether the runner calls `fn(output_path)` rather than `fn()` (the rule is StepSpec's)."""
    try:
        return _accepts_path_cached(fn)
    except TypeError:  # unhashable callable
        return takes_output_path(fn)


class StepTask:
    """Run one step's function inside its StepContext and return its JSON result."""

    def __init__(self, fn: Callable[..., Any], context: StepContext, memo: dict[Any, Any] | None = None):
        """`memo`: shared by a run's tasks, so closures of one factory pickle their shared part once."""
        self.fn = fn
        self.context = context
        self.pass_path = accepts_output_path(fn)
        self._memo = memo

    def __call__(self) -> Any:
        with running(self.context):
            result = self.fn(self.context.output_path) if self.pass_path else self.fn()
        return to_jsonable(result, self.context.step_name)

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        # One bytes payload, pickled here: the cluster's cloudpickle then only names the loader (its
        # per-object hooks would otherwise visit every part). Lazy: only a cluster that ships tasks
        # to another process pays for cloudpickle.
        c = self.context
        state = (dumps_fn(self.fn, self._memo), c.step_name, c.output_path, c.prefix, dict(c.dep_paths))
        return _load_task, (pickle.dumps((state, self.pass_path), _PROTOCOL),)

    def __repr__(self) -> str:
        return f"StepTask({self.context.step_name!r} -> {self.context.output_path})"


def _load_task(payload: bytes) -> StepTask:
    """The StepTask that `StepTask.__reduce__` pickled (in the process that runs it)."""
    (fn, name, output_path, prefix, dep_paths), pass_path = pickle.loads(payload)
    task = StepTask.__new__(StepTask)
    task.fn = loads_fn(fn)
    task.context = StepContext(name, output_path, prefix, dep_paths)
    task.pass_path = pass_path
    task._memo = None
    return task


_PROTOCOL = 5


def dumps_fn(fn: Callable[..., Any], memo: dict[Any, Any] | None) -> bytes | tuple[bytes, bytes]:
    """`fn` pickled: cloudpickle's bytes, or (template, part) for a closure pickled by value whose
    code object `memo` (shared by a run's steps) has seen; see the module docstring."""
    import cloudpickle

    # A closure (its qualname has `<locals>`) is always pickled by value: nothing can import it.
    if memo is None or type(fn) is not types.FunctionType or "<locals>" not in fn.__qualname__:
        return cloudpickle.dumps(fn)
    code = fn.__code__
    seen = memo.get((_TEMPLATES, code))
    names, used, template = seen if seen is not None else (_global_names(code), None, b"")
    # map() keeps the per-step checks in C: this runs once per step of a 10,000-step run.
    now = tuple(map(fn.__globals__.get, names))  # a name the module lacks (a builtin, an attribute): None
    if used is None or any(map(is_not, now, used)):
        template = cloudpickle.dumps(fn)
        memo[(_TEMPLATES, code)] = (names, now, template)
    values = tuple(map(_contents, fn.__closure__ or ()))
    part = (
        values,
        fn.__defaults__,
        fn.__kwdefaults__,
        fn.__name__,
        fn.__qualname__,
        fn.__module__,
        fn.__doc__,
        fn.__annotations__ or None,
        fn.__dict__ or None,
    )
    # Plain values (the usual captures: names, numbers) need no cloudpickle, which would pickle a
    # function of __main__ by value where pickle would name it (unloadable in the worker).
    captured = values + (fn.__defaults__ or ()) + tuple((fn.__kwdefaults__ or {}).values())
    plain = not (part[7] or part[8]) and set(map(type, captured)) <= _PLAIN
    return template, pickle.dumps(part, _PROTOCOL) if plain else cloudpickle.dumps(part)


def loads_fn(data: bytes | tuple[bytes, bytes]) -> Callable[..., Any]:
    """The function `dumps_fn` pickled."""
    if isinstance(data, bytes):
        return pickle.loads(data)
    template, part = data
    base = pickle.loads(template)
    values, defaults, kwdefaults, name, qualname, module, doc, annotations, attrs = pickle.loads(part)
    cells = tuple(types.CellType() if v is _EMPTY_MARK else types.CellType(v) for v in values) or None
    fn = types.FunctionType(base.__code__, base.__globals__, name, defaults, cells)
    fn.__kwdefaults__ = kwdefaults
    fn.__qualname__, fn.__module__, fn.__doc__ = qualname, module, doc
    if annotations:
        fn.__annotations__ = annotations
    if attrs:
        fn.__dict__.update(attrs)
    return fn


class _EmptyCell:
    """Pickled in place of an empty cell's contents."""

    def __reduce__(self) -> str:
        return "_EMPTY_MARK"


_EMPTY_MARK = _EmptyCell()
_PLAIN = frozenset({str, int, float, bool, bytes, type(None)})
_TEMPLATES = "fn_pickle.templates"


def _contents(cell: types.CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:
        return _EMPTY_MARK


def _global_names(code: types.CodeType) -> tuple[str, ...]:
    """Every name `code` and the code nested in it may read as a global (sorted)."""
    names: set[str] = set()
    stack = [code]
    while stack:
        co = stack.pop()
        names.update(co.co_names)
        stack.extend(c for c in co.co_consts if isinstance(c, types.CodeType))
    return tuple(sorted(names))
