"""The evaluation pages: every evaluation's scores, and one evaluation's results and samples."""

from __future__ import annotations

from urllib.parse import quote

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse

from marin.ui import data as data_pages
from marin.ui.index import RESULTS_FILE, Entry
from marin.ui.paths import NotFound, is_dir, read_json_capped, resolve
from marin.ui.site import Site

HARNESS_SAMPLES_SHOWN = 5  # per-sample records of each harness task the evaluation page shows inline


def evals(site: Site, request: Request) -> HTMLResponse:
    rows = []
    for e in site.index.entries(include_superseded=False):
        if e.kind == "eval":
            results = read_json_capped(f"{e.row.path}/{RESULTS_FILE}") or {}
            rows.append(
                {
                    "entry": e,
                    "perplexity": results.get("perplexity") or {},
                    "harness": results.get("harness") or {},
                }
            )
    return site.render("evals.html", request, rows=rows)


def evaluation(site: Site, request: Request) -> HTMLResponse:
    entry = site.entry_at(request.path_params["rel"])
    results = read_json_capped(f"{entry.row.path}/{RESULTS_FILE}")
    if not isinstance(results, dict):
        raise HTTPException(404, f"{entry.rel!r} holds no {RESULTS_FILE}")
    return site.render(
        "evaluation.html",
        request,
        entry=entry,
        results=results,
        samples_page=f"/data/{quote(entry.rel)}/samples.jsonl",
        harness_samples=harness_samples_of(site, entry, results),
    )


def harness_samples_of(site: Site, entry: Entry, results: dict) -> list[dict]:
    """Each harness task's per-sample file the results name: its data page and first records."""
    files = results.get("harness_samples")
    shown = []
    for task, file in files.items() if isinstance(files, dict) else ():
        if not isinstance(file, str):
            continue
        rel = f"{entry.rel}/{file}"
        try:
            path = resolve(site.prefix, rel)  # the name comes from a file in the prefix: kept inside it
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
