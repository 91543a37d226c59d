"""The lineage page: an output with everything upstream and downstream of it, as a graph."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import HTMLResponse

from marin.ui.index import Entry
from marin.ui.site import Site, _deps, _find_dep, shown_state


def lineage_graph(site: Site, start: Entry) -> dict[str, Any]:
    entries = site.index.entries()
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


def lineage(site: Site, request: Request) -> HTMLResponse:
    entry = site.entry_at(request.path_params["rel"])
    return site.render("lineage.html", request, entry=entry, graph=lineage_graph(site, entry))
