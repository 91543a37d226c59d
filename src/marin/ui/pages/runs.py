"""The runs page: training curves and differing hyperparameters of the chosen runs."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse

from marin.ui.index import Entry
from marin.ui.runs import CURVES, hyperparameter_diff, read_metrics, schedule_series, series
from marin.ui.site import Site, _deps, _find_dep, _float


def trained_inputs(entry: Entry, by_path: dict[str, Entry], by_key: dict[str, Entry]) -> list[Entry]:
    """The training outputs among an output's inputs (the runs an lr_sweep report compares)."""
    found = [_find_dep(d, by_path, by_key) for d in _deps(entry)]
    return [e for e in found if e is not None and e.kind == "train"]


def runs(site: Site, request: Request) -> HTMLResponse:
    q = request.query_params
    chosen = [r for r in q.getlist("o") if r]
    entries = site.index.entries()
    by_path = {e.row.path: e for e in entries}
    by_key = {e.key: e for e in entries if e.key}
    candidates = [e for e in entries if e.kind == "train"]
    reports = [(e, trained_inputs(e, by_path, by_key)) for e in entries if e.kind != "train"]
    reports = [(e, runs) for e, runs in reports if len(runs) > 1]
    selected: list[Entry] = []
    for rel in chosen:  # a report stands for the training runs it compares
        entry = site.entry_at(rel)
        for run in [entry] if entry.kind == "train" else trained_inputs(entry, by_path, by_key):
            if run.rel not in {s.rel for s in selected}:
                selected.append(run)
    payload, unreadable = [], []
    for e in selected:
        rows, why = read_metrics(e.row.path)
        curves = series(rows)
        declared = schedule_series((e.info.hash_attrs if e.info else None) or {})
        if declared:
            curves["lr_schedule"] = declared
        payload.append({"name": f"{e.row.name} ({e.rel})", "series": curves})
        if why:
            unreadable.append(f"{e.rel}: {why}")
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
    return site.render(
        "runs.html",
        request,
        candidates=candidates,
        reports=reports,
        selected=selected,
        chosen=set(chosen),
        payload=payload,
        unreadable=unreadable,
        curves=CURVES,
        params=params,
        settings=settings,
        show_all=q.get("all") == "1",
    )
