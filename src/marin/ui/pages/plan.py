"""The experiment page: the plan of the `--experiment` file, as `marin plan` would print it."""

from __future__ import annotations

from urllib.parse import quote

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse

import storage
from marin.ui.site import Site


def experiment(site: Site, request: Request) -> HTMLResponse:
    if site.experiment is None:
        raise HTTPException(404, "start the UI with `marin ui --experiment FILE.py` to see a plan")
    from marin.execution.step_runner import StepRunner

    plan = StepRunner(prefix=site.prefix, lease_timeout=site.lease_timeout).plan(site.experiment_steps)
    rows = []
    for s in plan.steps:
        out_rel = site.rel_of(s.output_path)
        target = s.previous_path or s.output_path
        linked = (
            site.rel_of(target) if target and site.index.get(storage.absolute(target)) is not None else None
        )
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
    return site.render("experiment.html", request, plan=plan, rows=rows, graph=graph, file=site.experiment)
