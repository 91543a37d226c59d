"""The scaling pages: every scaling fit under the prefix, and one fit's plots and tables.

A fit's page is drawn from its `fit.json` (the tables) and its PNG plots, which `/plot/...` serves:
only the plot names a fit writes, only from a fit's output, and capped in size.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

import storage
from marin.ui.index import FIT_FILE
from marin.ui.paths import open_binary, read_json_capped
from marin.ui.site import Site

PLOTS = (
    "isoflop.png",
    "frontier.png",
    "predicted.png",
)  # what a scaling fit draws (marin.scaling_laws.plots)
PLOT_CAP = 8 << 20  # bytes of one plot the UI serves


def fits(site: Site, request: Request) -> HTMLResponse:
    rows = []
    for e in site.index.entries(include_superseded=False):
        if e.kind == "fit":
            rows.append({"entry": e, "fit": read_json_capped(f"{e.row.path}/{FIT_FILE}") or {}})
    return site.render("scaling.html", request, rows=rows)


def fit(site: Site, request: Request) -> HTMLResponse:
    entry = site.entry_at(request.path_params["rel"])
    found = read_json_capped(f"{entry.row.path}/{FIT_FILE}")
    if not isinstance(found, dict):
        raise HTTPException(404, f"{entry.rel!r} holds no {FIT_FILE}")
    plots = [name for name in PLOTS if name in entry.names]
    return site.render("fit.html", request, entry=entry, fit=found, plots=plots)


def plot(site: Site, request: Request) -> Response:
    rel, _, name = request.path_params["rel"].rpartition("/")
    if name not in PLOTS:
        raise HTTPException(404, f"{name!r} is not a plot a scaling fit draws")
    entry = site.entry_at(rel)
    if entry.kind != "fit" or name not in entry.names:
        raise HTTPException(404, f"{rel!r} has no plot {name!r}")
    try:
        with open_binary(storage.join(entry.row.path, name)) as f:
            data = f.read(PLOT_CAP + 1)
    except OSError:  # missing, or not a regular file (storage.NotRegularFile)
        raise HTTPException(404, f"{rel}/{name} cannot be read") from None
    if len(data) > PLOT_CAP:
        raise HTTPException(404, f"{rel}/{name} is larger than {PLOT_CAP} bytes")
    return Response(data, media_type="image/png")
