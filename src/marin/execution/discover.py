"""Finding the steps an experiment file declares, for `marin run FILE.py` and `marin plan FILE.py`.

Convention: the file is imported as a module (named after the file, not `__main__`, so an
`if __name__ == "__main__":` block does not run). Every public top-level name (not starting with
`_`) bound to a StepSpec or a lazy handle, or to a list, tuple or dict whose values are such (or are
lists or tuples of such: a dict of `replicate(...)`s), is a declared step. All of them (and their
dependencies) run, unless `--step NAME` picks some: NAME matches a step's name or the variable it is
bound to.

Importing never runs a step: while the file is imported, a `StepRunner.run(steps)` it calls at top
level (as experiments/tutorials/custom_step.py does) only records `steps` as declared and returns a
RunResult holding their plan and no outcomes (so `result.output_path(step)` still works).
`marin plan` then plans them, and `marin run` runs them (or, with `--step`, only what was asked),
once, under its own prefix and options.
"""

from __future__ import annotations

import contextvars
import importlib.util
import os
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from marin.execution.errors import MarinError
from marin.execution.lazy import LazyStep, lower
from marin.execution.mistakes import as_experiment_error
from marin.execution.step_spec import StepSpec

# The module name `marin run` gives an experiment file (not `__main__`); `.executor_info` finds the
# experiment's file by it (see `run_provenance.experiment_file`).
EXPERIMENT_MODULE_PREFIX = "marin_experiment_"


def experiment_module_name(path: str) -> str:
    """The module name an experiment file at `path` is imported under."""
    stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    return f"{EXPERIMENT_MODULE_PREFIX}{stem}"


def is_experiment_module(module_name: str) -> bool:
    """Whether `module_name` is that of an experiment file `marin run` imported."""
    return module_name.startswith(EXPERIMENT_MODULE_PREFIX)


# While `import_file` runs: the steps the file passed to StepRunner.run, in call order.
_runner_calls: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar(
    "marin_runner_calls", default=None
)
# Per imported module name: the steps its top-level StepRunner.run calls were given.
_deferred: dict[str, list[Any]] = {}


def defer_run(steps: Iterable[Any] | Any) -> bool:
    """Called by `StepRunner.run`: while an experiment file is being imported, record `steps` as
    declared (to plan or run after the import) and return True: the call must not execute them."""
    calls = _runner_calls.get()
    if calls is None:
        return False
    calls.extend([steps] if _is_step(steps) else list(steps))
    return True


def import_file(path: str) -> Any:
    """Import the Python file at `path` as a module, with its directory and the cwd importable.

    A `StepRunner.run` the file calls while it is imported runs nothing (see `defer_run`). A
    mistake in the file is an `ExperimentError` naming its file and line (see `mistakes`).
    """
    full = os.path.abspath(path)
    if not os.path.isfile(full):
        raise MarinError(f"{path}: no such file; give the experiment's .py file")
    _refuse_shadowing(path, full)
    module_name = experiment_module_name(full)
    for directory in (os.getcwd(), os.path.dirname(full)):
        if directory not in sys.path:
            sys.path.insert(0, directory)
    spec = importlib.util.spec_from_file_location(module_name, full)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    import cloudpickle  # lazy: only `marin run` pays for it

    # The module's name is importable only in this process: its step functions travel to a
    # cluster's processes (LocalCluster, Ray workers) by value.
    cloudpickle.register_pickle_by_value(module)
    calls: list[Any] = []
    token = _runner_calls.set(calls)
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        mistake = as_experiment_error(e)  # the user's mistake as one line naming file:line; None: a bug
        if mistake is None:
            raise
        raise mistake from e
    finally:
        _runner_calls.reset(token)
    _deferred[module_name] = calls
    return module


def _refuse_shadowing(path: str, full: str) -> None:
    """An experiment file named like a module of the standard library or an installed package
    (`concurrent.py`, `torch.py`) would be imported in its place, here and in every worker (its folder
    is on their path), which then fails far from the cause: one line saying so instead."""
    stem = os.path.splitext(os.path.basename(full))[0]
    if not stem.isidentifier():
        return
    folder = os.path.dirname(full)
    if stem in sys.stdlib_module_names:
        what = "the standard library's module"
    else:
        saved = list(sys.path)
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") not in (folder, os.getcwd())]
        try:
            found = importlib.util.find_spec(stem)
        except (ImportError, ValueError):
            found = None
        finally:
            sys.path[:] = saved
        origin = getattr(found, "origin", None)
        # A namespace package (a folder without __init__.py, origin None) yields to any module of
        # its name, so a file named like one shadows nothing a library relies on.
        if found is None or origin in (None, "namespace") or os.path.abspath(origin) == full:
            return
        what = "the installed module"
    raise MarinError(
        f"{path}: the file's name shadows {what} {stem!r}, which every import of {stem!r} (by marin, "
        f"by libraries, in the workers) would then load instead; rename it, e.g. to {stem}_experiment.py"
    )


def _is_step(value: Any) -> bool:
    return isinstance(value, StepSpec) or (isinstance(value, LazyStep) and not isinstance(value, type))


def _steps_in(value: Any, depth: int = 2) -> Iterable[Any]:
    """The steps in a list, tuple or dict's values, and in those values' own lists and tuples."""
    for v in value.values() if isinstance(value, dict) else value:
        if _is_step(v):
            yield v
        elif depth > 1 and isinstance(v, (list, tuple)):
            yield from _steps_in(v, depth - 1)


def declared_steps(module: Any) -> list[tuple[str, Any]]:
    """(variable name, step or handle) for every step the module binds at top level, in order."""
    found: list[tuple[str, Any]] = []
    for var, value in vars(module).items():
        if var.startswith("_"):
            continue
        if _is_step(value):
            found.append((var, value))
        elif isinstance(value, (list, tuple, dict)):
            found += [(var, v) for v in _steps_in(value)]
    found += [
        ("StepRunner.run", v) for v in _deferred.get(getattr(module, "__name__", ""), ()) if _is_step(v)
    ]
    return found


def load_steps(path: str, names: Sequence[str] = ()) -> list[StepSpec]:
    """The lowered steps `path` declares, or only those whose step or variable name is in `names`."""
    module = import_file(path)
    declared = [(var, lower(value)) for var, value in declared_steps(module)]
    if not declared:
        raise MarinError(
            f"{path} declares no steps: bind StepSpecs or lazy handles (tokenized(), train_lm(), ...) "
            "to top-level names, or pass them to StepRunner().run(...) at top level"
        )
    if names:
        wanted = set(names)
        picked = [spec for var, spec in declared if var in wanted or spec.name in wanted]
        unknown = wanted - {var for var, _ in declared} - {spec.name for _, spec in declared}
        if unknown:
            known = sorted({spec.name for _, spec in declared})
            raise MarinError(f"{path} declares no step named {sorted(unknown)}; it declares {known}")
        declared = [(None, spec) for spec in picked]
    unique: dict[int, StepSpec] = {}
    for _, spec in declared:
        unique.setdefault(id(spec), spec)
    return list(unique.values())
