"""The perplexity-gap pages: every `perplexity_gap` step's headline, and one report's tables.

A report is drawn from its `gap.json` (`marin.evaluation.gap.GapReport`): the total with its paired
interval, the split by byte class and by domain, and the documents and spans where each model wins.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse

from marin.ui.index import GAP_FILE
from marin.ui.paths import read_json_capped
from marin.ui.site import Site


def gaps(site: Site, request: Request) -> HTMLResponse:
    rows = []
    for e in site.index.entries(include_superseded=False):
        if e.kind == "gap":
            report = read_json_capped(f"{e.row.path}/{GAP_FILE}")
            rows.append({"entry": e, "report": report if isinstance(report, dict) else {}})
    return site.render("gaps.html", request, rows=rows)


def gap(site: Site, request: Request) -> HTMLResponse:
    entry = site.entry_at(request.path_params["rel"])
    report = read_json_capped(f"{entry.row.path}/{GAP_FILE}")
    if not isinstance(report, dict):
        raise HTTPException(404, f"{entry.rel!r} holds no {GAP_FILE}")
    return site.render("gap.html", request, entry=entry, report=report)
