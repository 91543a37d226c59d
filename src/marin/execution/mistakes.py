"""A mistake in an experiment file, as one line: where it is (file:line) and what is wrong.

`marin run FILE` / `marin plan FILE` import the file (`discover.import_file`). What goes wrong
there is reported as an `ExperimentError`, one line a person can act on, when it is the user's:

- a syntax error: the file and line Python reports, with the offending source line as the hint;
- an error raised on purpose (`errors.is_reported`: a bad argument to a handle, a missing path)
  anywhere below the file: the line of the user's own code that led to it;
- any other exception raised in the user's own code (an import of a missing module, a misspelt
  name, a call with a wrong keyword): that line, the exception's type and message, and for an
  unexpected keyword the parameter it most likely meant.

"The user's own code" is every file outside the installed libraries (marin's packages, the
standard library, site-packages), so a helper module next to the experiment counts as the user's.
Anything else (an exception raised inside a library that is not one of its reported errors) is a
bug, and keeps its traceback.
"""

from __future__ import annotations

import inspect
import os
import re
import sys
import traceback
from types import FrameType, TracebackType
from typing import Any

from marin.execution.errors import MarinError, error_line, is_reported

__all__ = ["ExperimentError", "as_experiment_error"]

_OUR_PACKAGES = ("marin", "zephyr", "fray", "storage", "procpool", "rayconnect")
_UNEXPECTED_KEYWORD = re.compile(r"^(?P<func>[\w.]+)\(\) got an unexpected keyword argument '(?P<kw>\w+)'$")


class ExperimentError(MarinError):
    """A mistake in an experiment file: `where` (file:line) and the one-line message; `hint` is at
    most one more line (the offending source line of a syntax error)."""

    def __init__(self, where: str, message: str, hint: str = ""):
        self.where, self.hint = where, hint
        super().__init__(f"{where}: {message}" if where else message)


def as_experiment_error(error: BaseException) -> ExperimentError | None:
    """`error`, raised while an experiment file was imported, as one line; None when it is a bug."""
    if isinstance(error, SyntaxError):
        where = _where(error.filename, error.lineno)
        text = (error.text or "").strip()
        return ExperimentError(where, f"{type(error).__name__}: {error.msg}", text)
    frame, line = _user_frame(error.__traceback__)
    if frame is None:
        return None
    where = _where(frame.f_code.co_filename, line)
    if is_reported(error):
        return ExperimentError(where, error_line(error))
    if not _raised_in(error.__traceback__, frame):
        return None  # raised inside a library called from the user's code: a bug there
    message = error_line(error)
    suggestion = _keyword_suggestion(error, frame)
    return ExperimentError(where, message + (f"; did you mean {suggestion}?" if suggestion else ""))


def _library_roots() -> tuple[str, ...]:
    import sysconfig  # here, as difflib below: only a reported mistake pays their import (~1 and ~3 ms)

    roots = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    for name in _OUR_PACKAGES:
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None):
            roots.add(os.path.dirname(os.path.abspath(module.__file__)))
    return tuple(os.path.join(r, "") for r in roots if r)


def _is_user_file(filename: str, roots: tuple[str, ...]) -> bool:
    if filename.startswith("<"):  # <frozen importlib._bootstrap>, <string>
        return False
    return not os.path.abspath(filename).startswith(roots)


def _user_frame(tb: TracebackType | None) -> tuple[FrameType | None, int | None]:
    """The innermost frame of the traceback in the user's own code, and its line."""
    roots = _library_roots()
    found: tuple[FrameType | None, int | None] = (None, None)
    while tb is not None:
        if _is_user_file(tb.tb_frame.f_code.co_filename, roots):
            found = (tb.tb_frame, tb.tb_lineno)
        tb = tb.tb_next
    return found


def _raised_in(tb: TracebackType | None, frame: FrameType) -> bool:
    """Whether the user's `frame` is the last frame of the traceback that is not Python's own
    import machinery (so the exception came from the user's line itself)."""
    last = None
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith("<frozen"):
            last = tb.tb_frame
        tb = tb.tb_next
    return last is frame


def _where(filename: str | None, line: int | None) -> str:
    if not filename:
        return ""
    path = os.path.abspath(filename)
    here = os.path.join(os.getcwd(), "")
    shown = path[len(here) :] if path.startswith(here) else path
    return f"{shown}:{line}" if line else shown


def _keyword_suggestion(error: BaseException, frame: FrameType) -> str | None:
    """For `f() got an unexpected keyword argument 'x'`, the parameter of `f` closest to `x`."""
    match = _UNEXPECTED_KEYWORD.match(str(error)) if isinstance(error, TypeError) else None
    if match is None:
        return None
    target = _lookup(match["func"], frame)
    try:
        names = list(inspect.signature(target).parameters) if target is not None else []
    except (TypeError, ValueError):
        return None
    import difflib

    close = difflib.get_close_matches(match["kw"], [n for n in names if n != "self"], n=1, cutoff=0.6)
    return close[0] if close else None


def _lookup(dotted: str, frame: FrameType) -> Any:
    """`dotted` (`sweep_report`, `LlamaConfig.__init__`) as the frame's code sees it."""
    parts = dotted.split(".")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    value = frame.f_locals.get(parts[0], frame.f_globals.get(parts[0]))
    for part in parts[1:]:
        value = getattr(value, part, None)
    return value


def format_traceback(error: BaseException) -> str:
    """The full traceback of `error` (what `--traceback` prints)."""
    return "".join(traceback.format_exception(type(error), error, error.__traceback__))
