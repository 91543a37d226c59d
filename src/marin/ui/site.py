"""What every page handler shares: the prefix, its index, the templates, and lookups under the prefix."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse

import storage
from marin.execution.artifact import DepRecord
from marin.execution.aside import AsideKind
from marin.execution.errors import first_line
from marin.execution.explain import format_seconds
from marin.execution.states import OutputState
from marin.ui.index import Entry, OutputIndex
from marin.ui.paths import NotFound, is_dir, relative, resolve

HERE = Path(__file__).parent
# What a page shows for any moved-aside copy, whatever its status recorded: the kind most such copies
# are (an output replaced by a new key or force_run), also the CSS class (ui.css) and chart colour (ui.js).
SUPERSEDED = AsideKind.SUPERSEDED
STATES = (
    OutputState.SUCCESS,
    OutputState.FAILED,
    OutputState.RUNNING,
    OutputState.INTERRUPTED,
    SUPERSEDED,
    OutputState.UNREADABLE,
)


def script_json(value: Any) -> str:
    """JSON safe to place inside a <script> element: '<', '>' and '&' are escaped as \\u sequences."""
    text = orjson.dumps(value).decode()
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _pretty(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()


def rounded(value: Any, digits: int = 4) -> Any:
    """`value` with every float rounded to `digits` significant digits, for reading (a step's
    results and stats; keys and parameters are shown exactly, and every record file is one click away)."""
    if isinstance(value, float):
        return float(f"{value:.{digits}g}")
    if isinstance(value, dict):
        return {k: rounded(v, digits) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [rounded(v, digits) for v in value]
    return value


def _pretty_rounded(value: Any) -> str:
    return _pretty(rounded(value))


def _when(t: Any) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if isinstance(t, (int, float)) else "-"


def shown_state(entry: Entry) -> OutputState | AsideKind:
    """The state a page shows: a moved-aside copy is SUPERSEDED whatever it recorded."""
    return SUPERSEDED if entry.row.superseded else entry.row.state


def template_env(prefix: str, has_experiment: bool) -> Environment:
    """The Jinja templates, autoescaped, with the helpers and names every page uses."""
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True))
    env.globals.update(
        fmt_s=format_seconds,
        when=_when,
        pretty=_pretty,
        pretty_rounded=_pretty_rounded,
        script_json=script_json,
        quote=quote,
        prefix=prefix,
        has_experiment=has_experiment,
        STATES=STATES,
        shown_state=shown_state,
        first_line=first_line,
    )
    return env


@dataclass(frozen=True)
class Site:
    """One served prefix: its index, its templates and, with `--experiment`, that file's steps."""

    prefix: str
    index: OutputIndex
    env: Environment
    lease_timeout: float
    experiment: str | None = None
    experiment_steps: list = field(default_factory=list)

    def render(self, name: str, request: Request, status_code: int = 200, **context: Any) -> HTMLResponse:
        """The template `name` rendered as the response."""
        html = self.env.get_template(name).render(request=request, **context)
        return HTMLResponse(html, status_code=status_code)

    def locate(self, rel: str) -> str:
        """The path of `rel` under the prefix; 404 for anything outside it."""
        try:
            return resolve(self.prefix, rel)
        except NotFound:
            raise HTTPException(404, f"nothing at {rel!r} under the prefix") from None

    def entry_at(self, rel: str) -> Entry:
        """The step output at `rel`; 404 if there is none."""
        path = self.locate(rel)
        entry = self.index.get(path) if is_dir(path) else None
        if entry is None:
            raise HTTPException(404, f"{rel!r} is not a step output")
        return entry

    def rel_of(self, path: str | None) -> str | None:
        """`path` relative to the prefix (None for None)."""
        return relative(self.prefix, storage.absolute(path)) if path else None


def _deps(entry: Entry) -> tuple[DepRecord, ...]:
    return entry.info.deps if entry.info is not None else ()


def _find_dep(dep: DepRecord, by_path: dict[str, Entry], by_key: dict[str, Entry]) -> Entry | None:
    return by_path.get(storage.absolute(dep.path)) or by_key.get(dep.key)


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def _float(value: str | None, default: float) -> float:
    try:
        return float(value) if value is not None else default
    except ValueError:
        return default
