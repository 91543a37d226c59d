"""The outputs table, one output's page, its log, and the key diff of two outputs."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse

import storage
from marin.execution.artifact import ARTIFACT_FILE, INFO_FILE, LOG_FILE
from marin.execution.cache_key import diff_key_records
from marin.execution.states import OutputState
from marin.execution.status import STATUS_FILE, StatusRecord
from marin.ui.index import STATS_FILE, artifact_checked
from marin.ui.paths import read_json_capped, read_record_checked, read_tail
from marin.ui.site import Site, _int, shown_state

PAGE_SIZE = 500


def outputs(site: Site, request: Request) -> HTMLResponse:
    q = request.query_params
    name, state = q.get("q", "").strip(), q.get("state", "")
    sort, desc = q.get("sort", "path"), q.get("desc") == "1"
    page = _int(q.get("page"), 0)
    entries = site.index.entries()
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
    return site.render(
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


def output(site: Site, request: Request) -> HTMLResponse:
    rel = request.path_params["rel"]
    entry = site.entry_at(rel)
    path = site.locate(rel)
    status, status_problem = read_record_checked(f"{path}/{STATUS_FILE}", StatusRecord)
    info = entry.info
    artifact, artifact_problem = artifact_checked(path)
    deps = [
        {"name": d.name, "key": d.key, "path": d.path, "rel": site.rel_of(d.path)}
        for d in (info.deps if info is not None else ())
    ]
    versions = [e for e in site.index.entries() if e.row.name == entry.row.name and e.rel != entry.rel]
    log_text, log_size, log_problem = _log_tail(path)
    unreadable = [
        (name, why)
        for name, why in (
            (STATUS_FILE, status_problem),
            (INFO_FILE, entry.info_problem),
            (ARTIFACT_FILE, artifact_problem),
            (LOG_FILE, log_problem),
        )
        if why is not None
    ]
    inputs = [
        site.index.get(storage.join(site.prefix, d["rel"])) for d in deps if d["rel"]
    ]  # only inside the prefix
    has_curves = entry.kind == "train" or sum(1 for e in inputs if e is not None and e.kind == "train") > 1
    return site.render(
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
        unreadable=unreadable,
        stats=read_json_capped(f"{path}/{STATS_FILE}") if STATS_FILE in entry.names else None,
    )


def _log_tail(path: str) -> tuple[str, int, str | None]:
    """The log's tail and length, and why it could not be read (a FIFO, a symlink), or None."""
    try:
        return (*read_tail(f"{path}/{LOG_FILE}"), None)
    except storage.NotRegularFile as e:
        return "", 0, e.strerror


def log(site: Site, request: Request) -> HTMLResponse:
    entry = site.entry_at(request.path_params["rel"])
    path = site.locate(request.path_params["rel"])
    log_text, log_size, _ = _log_tail(path)
    return site.render(
        "log.html",
        request,
        rel=entry.rel,
        log_text=log_text,
        log_size=log_size,
        running=entry.row.state == OutputState.RUNNING,
    )


def diff(site: Site, request: Request) -> HTMLResponse:
    a, b = site.entry_at(request.query_params.get("a", "")), site.entry_at(request.query_params.get("b", ""))
    ra, rb = (a.info.key_record if a.info else None), (b.info.key_record if b.info else None)
    changes = diff_key_records(ra, rb) if isinstance(ra, dict) and isinstance(rb, dict) else None
    return site.render("diff.html", request, a=a, b=b, changes=changes)
