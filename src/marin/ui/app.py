"""The Starlette app behind `marin ui`: server-rendered, read-only pages over one prefix.

Every page is a GET whose URL carries its whole state (filters, selected runs, page numbers), so a
URL can be shared. Nothing here writes, deletes or runs anything under the prefix. Handlers are
plain functions, which Starlette runs on its thread pool: a slow read never stalls other pages.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import orjson
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

import storage
from marin.execution.artifact import LOG_FILE, DepRecord
from marin.execution.cache_key import diff_key_records
from marin.execution.explain import format_seconds
from marin.execution.states import OutputState
from marin.execution.status import STATUS_FILE, StatusRecord
from marin.ui import data as data_pages
from marin.ui.index import LEDGER_FILE, RESULTS_FILE, Entry, OutputIndex, artifact_of
from marin.ui.paths import (
    NotFound,
    is_dir,
    read_json_capped,
    read_record_capped,
    read_tail,
    relative,
    resolve,
)
from marin.ui.runs import CURVES, hyperparameter_diff, read_metrics, series

HERE = Path(__file__).parent
TOKEN_COOKIE = "marin_ui_token"
PAGE_SIZE = 500
LISTING_CAP = 1000  # entries of one folder the data page lists
HARNESS_SAMPLES_SHOWN = 5  # per-sample records of each harness task the evaluation page shows inline
SUPERSEDED = "superseded"  # what a page shows for a moved-aside copy, whatever it recorded
STATES = (
    OutputState.SUCCESS,
    OutputState.FAILED,
    OutputState.RUNNING,
    OutputState.INTERRUPTED,
    SUPERSEDED,
    OutputState.UNREADABLE,
)


@dataclass(frozen=True)
class UiConfig:
    """What the server shows: the prefix, an optional experiment file, and the token every request needs."""

    prefix: str
    token: str | None = None
    experiment: str | None = None
    lease_timeout: float = 60.0


def script_json(value: Any) -> str:
    """JSON safe to place inside a <script> element: '<', '>' and '&' are escaped as \\u sequences."""
    text = orjson.dumps(value).decode()
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _pretty(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()


def _when(t: Any) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if isinstance(t, (int, float)) else "-"


def shown_state(entry: Entry) -> str:
    """The state a page shows: a superseded copy is 'superseded' whatever it recorded."""
    return SUPERSEDED if entry.row.superseded else entry.row.state


class TokenGate:
    """ASGI middleware: every request must carry the token (a `?token=` query sets a cookie)."""

    def __init__(self, app: ASGIApp, token: str):
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        offered = request.query_params.get("token")
        if offered is not None and hmac.compare_digest(offered.encode(), self.token.encode()):
            params = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            target = request.url.path + ("?" + urlencode(params) if params else "")
            response: Response = RedirectResponse(target, status_code=303)
            response.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="strict")
            await response(scope, receive, send)
            return
        cookie = request.cookies.get(TOKEN_COOKIE, "")
        if hmac.compare_digest(cookie.encode(), self.token.encode()):
            await self.app(scope, receive, send)
            return
        await PlainTextResponse(
            "this marin ui needs its token: open the URL `marin ui` printed (?token=...)", status_code=401
        )(scope, receive, send)


def create_app(config: UiConfig) -> Starlette:
    """The app serving `config.prefix` (read-only)."""
    prefix = storage.absolute(config.prefix)
    index = OutputIndex(prefix, config.lease_timeout)
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True))
    env.globals.update(
        fmt_s=format_seconds,
        when=_when,
        pretty=_pretty,
        script_json=script_json,
        quote=quote,
        prefix=prefix,
        has_experiment=config.experiment is not None,
        STATES=STATES,
        shown_state=shown_state,
    )
    experiment_steps: list = []
    if config.experiment:
        from marin.execution.discover import load_steps

        os.environ["MARIN_PREFIX"] = prefix  # as `marin plan --prefix`: a runner the file starts agrees
        experiment_steps = load_steps(config.experiment)

    def render(name: str, request: Request, status_code: int = 200, **context: Any) -> HTMLResponse:
        html = env.get_template(name).render(request=request, **context)
        return HTMLResponse(html, status_code=status_code)

    def locate(rel: str) -> str:
        try:
            return resolve(prefix, rel)
        except NotFound:
            raise HTTPException(404, f"nothing at {rel!r} under the prefix") from None

    def entry_at(rel: str) -> Entry:
        path = locate(rel)
        entry = index.get(path) if is_dir(path) else None
        if entry is None:
            raise HTTPException(404, f"{rel!r} is not a step output")
        return entry

    def rel_of(path: str | None) -> str | None:
        return relative(prefix, storage.absolute(path)) if path else None

    def outputs(request: Request) -> HTMLResponse:
        q = request.query_params
        name, state = q.get("q", "").strip(), q.get("state", "")
        sort, desc = q.get("sort", "path"), q.get("desc") == "1"
        page = _int(q.get("page"), 0)
        entries = index.entries()
        if name:
            needle = name.lower()
            entries = [e for e in entries if needle in e.row.name.lower() or needle in e.rel.lower()]
        if state:
            entries = [e for e in entries if shown_state(e) == state]
        keys = {
            "name": lambda e: e.row.name,
            "state": shown_state,
            "path": lambda e: e.rel,
            "age": lambda e: (e.age_s is None, e.age_s or 0.0),
            "duration": lambda e: (e.row.duration_s is None, e.row.duration_s or 0.0),
            "headline": lambda e: e.row.headline,
        }
        entries.sort(key=keys.get(sort, keys["path"]), reverse=desc)
        total = len(entries)
        shown = entries[page * PAGE_SIZE : (page + 1) * PAGE_SIZE]
        return render(
            "outputs.html",
            request,
            entries=shown,
            total=total,
            q=name,
            state=state,
            sort=sort,
            desc=desc,
            page=page,
            pages=max(1, -(-total // PAGE_SIZE)),
            query=dict(q),
        )

    def output(request: Request) -> HTMLResponse:
        rel = request.path_params["rel"]
        entry = entry_at(rel)
        path = locate(rel)
        status = read_record_capped(f"{path}/{STATUS_FILE}", StatusRecord)
        info = entry.info
        artifact = artifact_of(path)
        deps = [
            {"name": d.name, "key": d.key, "path": d.path, "rel": rel_of(d.path)}
            for d in (info.deps if info is not None else ())
        ]
        versions = [e for e in index.entries() if e.row.name == entry.row.name and e.rel != entry.rel]
        log_text, log_size = read_tail(f"{path}/{LOG_FILE}")
        inputs = [
            index.get(storage.join(prefix, d["rel"])) for d in deps if d["rel"]
        ]  # only inside the prefix
        has_curves = (
            entry.kind == "train" or sum(1 for e in inputs if e is not None and e.kind == "train") > 1
        )
        return render(
            "output.html",
            request,
            entry=entry,
            rel=entry.rel,
            status=status,
            info=info,
            has_curves=has_curves,
            artifact=artifact,
            deps=deps,
            versions=versions,
            log_text=log_text,
            log_size=log_size,
            running=entry.row.state == OutputState.RUNNING,
            state=shown_state(entry),
        )

    def log(request: Request) -> HTMLResponse:
        entry = entry_at(request.path_params["rel"])
        path = locate(request.path_params["rel"])
        log_text, log_size = read_tail(f"{path}/{LOG_FILE}")
        return render(
            "log.html",
            request,
            rel=entry.rel,
            log_text=log_text,
            log_size=log_size,
            running=entry.row.state == OutputState.RUNNING,
        )

    def diff(request: Request) -> HTMLResponse:
        a, b = entry_at(request.query_params.get("a", "")), entry_at(request.query_params.get("b", ""))
        ra, rb = (a.info.key_record if a.info else None), (b.info.key_record if b.info else None)
        changes = diff_key_records(ra, rb) if isinstance(ra, dict) and isinstance(rb, dict) else None
        return render("diff.html", request, a=a, b=b, changes=changes)

    def lineage_graph(start: Entry) -> dict[str, Any]:
        entries = index.entries()
        by_path = {e.row.path: e for e in entries}
        by_key = {e.key: e for e in entries if e.key}
        downstream: dict[str, list[Entry]] = {}
        for e in entries:
            for d in _deps(e):
                target = _find_dep(d, by_path, by_key)
                if target is not None:
                    downstream.setdefault(target.row.path, []).append(e)
        nodes: dict[str, Entry] = {start.row.path: start}
        edges: set[tuple[str, str]] = set()
        todo = [start]
        while todo:  # upstream
            e = todo.pop()
            for d in _deps(e):
                dep = _find_dep(d, by_path, by_key)
                if dep is None:
                    continue
                edges.add((dep.rel, e.rel))
                if dep.row.path not in nodes:
                    nodes[dep.row.path] = dep
                    todo.append(dep)
        todo = [start]
        while todo:  # downstream
            e = todo.pop()
            for child in downstream.get(e.row.path, []):
                edges.add((e.rel, child.rel))
                if child.row.path not in nodes:
                    nodes[child.row.path] = child
                    todo.append(child)
        return {
            "nodes": [
                {
                    "id": e.rel,
                    "label": e.row.name,
                    "state": shown_state(e),
                    "url": f"/output/{quote(e.rel)}",
                    "focus": e is start,
                }
                for e in nodes.values()
            ],
            "edges": [{"source": s, "target": t} for s, t in sorted(edges)],
        }

    def lineage(request: Request) -> HTMLResponse:
        entry = entry_at(request.path_params["rel"])
        return render("lineage.html", request, entry=entry, graph=lineage_graph(entry))

    def experiment(request: Request) -> HTMLResponse:
        if config.experiment is None:
            raise HTTPException(404, "start the UI with `marin ui --experiment FILE.py` to see a plan")
        from marin.execution.step_runner import StepRunner

        plan = StepRunner(prefix=prefix, lease_timeout=config.lease_timeout).plan(experiment_steps)
        rows = []
        for s in plan.steps:
            out_rel = rel_of(s.output_path)
            target = s.previous_path or s.output_path
            linked = rel_of(target) if target and index.get(storage.absolute(target)) is not None else None
            rows.append({"step": s, "rel": out_rel, "link": linked})
        graph = {
            "nodes": [
                {
                    "id": str(i),
                    "label": s.name,
                    "state": s.state,
                    "url": f"/output/{quote(r['link'])}" if r["link"] else "",
                }
                for i, (s, r) in enumerate(zip(plan.steps, rows, strict=True))
            ],
            "edges": [{"source": str(d), "target": str(i)} for i, s in enumerate(plan.steps) for d in s.deps],
        }
        return render("experiment.html", request, plan=plan, rows=rows, graph=graph, file=config.experiment)

    def trained_inputs(entry: Entry, by_path: dict[str, Entry], by_key: dict[str, Entry]) -> list[Entry]:
        """The training outputs among an output's inputs (the runs an lr_sweep report compares)."""
        found = [_find_dep(d, by_path, by_key) for d in _deps(entry)]
        return [e for e in found if e is not None and e.kind == "train"]

    def runs(request: Request) -> HTMLResponse:
        q = request.query_params
        chosen = [r for r in q.getlist("o") if r]
        entries = index.entries()
        by_path = {e.row.path: e for e in entries}
        by_key = {e.key: e for e in entries if e.key}
        candidates = [e for e in entries if e.kind == "train"]
        reports = [(e, trained_inputs(e, by_path, by_key)) for e in entries if e.kind != "train"]
        reports = [(e, runs) for e, runs in reports if len(runs) > 1]
        selected: list[Entry] = []
        for rel in chosen:  # a report stands for the training runs it compares
            entry = entry_at(rel)
            for run in [entry] if entry.kind == "train" else trained_inputs(entry, by_path, by_key):
                if run.rel not in {s.rel for s in selected}:
                    selected.append(run)
        payload = [
            {"name": f"{e.row.name} ({e.rel})", "series": series(read_metrics(e.row.path))} for e in selected
        ]
        params = hyperparameter_diff(
            [(e.info.hash_attrs if e.info else None) or {} for e in selected],
            only_different=q.get("all") != "1",
        )
        settings = {
            "x": q.get("x", "step"),
            "smooth": _float(q.get("smooth"), 0.0),
            "logx": q.get("logx") == "1",
            "logy": q.get("logy") == "1",
        }
        return render(
            "runs.html",
            request,
            candidates=candidates,
            reports=reports,
            selected=selected,
            chosen=set(chosen),
            payload=payload,
            curves=CURVES,
            params=params,
            settings=settings,
            show_all=q.get("all") == "1",
        )

    def data(request: Request) -> HTMLResponse:
        rel = request.path_params.get("rel", "")
        path = locate(rel)
        q = request.query_params
        start, size = max(0, _int(q.get("start"), 0)), min(200, max(1, _int(q.get("size"), 20)))
        context: dict[str, Any] = {"rel": rel.strip("/"), "start": start, "size": size, "query": dict(q)}
        if not is_dir(path):
            if not data_pages.is_browsable(path):
                raise HTTPException(404, f"{rel!r} is not a jsonl, txt or parquet file")
            return render(
                "data.html", request, mode="file", page=data_pages.page_file(path, start, size), **context
            )
        names = storage.list_names(path)
        if LEDGER_FILE in names:
            cache_splits = (read_json_capped(f"{path}/{LEDGER_FILE}") or {}).get("splits") or {}
            split = q.get("split") or next(iter(cache_splits), "train")
            if split not in cache_splits:
                raise HTTPException(404, f"the token cache has no split {split!r}")
            cache, page = data_pages.page_token_cache(path, split, start, size, q.get("ids") == "1")
            return render(
                "data.html",
                request,
                mode="tokens",
                page=page,
                cache=cache,
                split=split,
                splits=list(cache_splits),
                ids=q.get("ids") == "1",
                **context,
            )
        listing = []
        for name in sorted(names)[:LISTING_CAP]:
            child = storage.join(path, name)
            child_rel = f"{context['rel']}/{name}".strip("/")
            listing.append(
                {
                    "name": name,
                    "rel": child_rel,
                    "dir": is_dir(child),
                    "browsable": data_pages.is_browsable(name),
                }
            )
        artifact = artifact_of(path) if index.get(path) is not None else None
        return render(
            "data.html",
            request,
            mode="dir",
            listing=listing,
            artifact=artifact,
            more=max(0, len(names) - LISTING_CAP),
            **context,
        )

    def evals(request: Request) -> HTMLResponse:
        rows = []
        for e in index.entries(include_superseded=False):
            if e.kind == "eval":
                results = read_json_capped(f"{e.row.path}/{RESULTS_FILE}") or {}
                rows.append(
                    {
                        "entry": e,
                        "perplexity": results.get("perplexity") or {},
                        "harness": results.get("harness") or {},
                    }
                )
        return render("evals.html", request, rows=rows)

    def evaluation(request: Request) -> HTMLResponse:
        entry = entry_at(request.path_params["rel"])
        results = read_json_capped(f"{entry.row.path}/{RESULTS_FILE}")
        if not isinstance(results, dict):
            raise HTTPException(404, f"{entry.rel!r} holds no {RESULTS_FILE}")
        return render(
            "evaluation.html",
            request,
            entry=entry,
            results=results,
            samples_page=f"/data/{quote(entry.rel)}/samples.jsonl",
            harness_samples=harness_samples_of(entry, results),
        )

    def harness_samples_of(entry: Entry, results: dict) -> list[dict]:
        """Each harness task's per-sample file the results name: its data page and first records."""
        files = results.get("harness_samples")
        shown = []
        for task, file in files.items() if isinstance(files, dict) else ():
            if not isinstance(file, str):
                continue
            rel = f"{entry.rel}/{file}"
            try:
                path = resolve(prefix, rel)  # the name comes from a file in the prefix: kept inside it
            except NotFound:
                continue
            if is_dir(path) or not data_pages.is_browsable(path):
                continue
            shown.append(
                {
                    "task": task,
                    "page": f"/data/{quote(rel)}",
                    "records": data_pages.page_file(path, 0, HARNESS_SAMPLES_SHOWN),
                }
            )
        return shown

    async def not_found(request: Request, exc: HTTPException) -> HTMLResponse:
        return render("error.html", request, status_code=exc.status_code, message=exc.detail)

    routes = [
        Route("/", outputs),
        Route("/output/{rel:path}", output),
        Route("/log/{rel:path}", log),
        Route("/lineage/{rel:path}", lineage),
        Route("/diff", diff),
        Route("/experiment", experiment),
        Route("/runs", runs),
        Route("/data", data),
        Route("/data/{rel:path}", data),
        Route("/evals", evals),
        Route("/evals/{rel:path}", evaluation),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    middleware = [Middleware(TokenGate, token=config.token)] if config.token else []

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        # Read every record once in the background, so that the first page load finds the index warm.
        threading.Thread(target=index.entries, name="marin-ui-index", daemon=True).start()
        yield

    return Starlette(
        routes=routes, middleware=middleware, exception_handlers={HTTPException: not_found}, lifespan=lifespan
    )


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
