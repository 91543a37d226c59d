"""The Starlette app behind `marin ui`: server-rendered, read-only pages over one prefix.

Every page is a GET whose URL carries its whole state (filters, selected runs, page numbers), so a
URL can be shared. Nothing here writes, deletes or runs anything under the prefix. Handlers
(`marin.ui.pages`) are plain functions, which Starlette runs on its thread pool: a slow read never
stalls other pages. This module maps URLs to them and adds the token gate.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass
from functools import partial

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

import storage
from marin.ui.auth import TokenGate
from marin.ui.index import OutputIndex
from marin.ui.pages import data, evals, gaps, lineage, outputs, plan, runs, scaling
from marin.ui.site import HERE, Site, template_env


@dataclass(frozen=True)
class UiConfig:
    """What the server shows: the prefix, an optional experiment file, and the token every request needs."""

    prefix: str
    token: str | None = None
    experiment: str | None = None
    lease_timeout: float = 60.0


def create_app(config: UiConfig) -> Starlette:
    """The app serving `config.prefix` (read-only)."""
    prefix = storage.absolute(config.prefix)
    index = OutputIndex(prefix, config.lease_timeout)
    experiment_steps: list = []
    if config.experiment:
        from marin.execution.discover import load_steps

        os.environ["MARIN_PREFIX"] = prefix  # as `marin plan --prefix`: a runner the file starts agrees
        experiment_steps = load_steps(config.experiment)
    site = Site(
        prefix=prefix,
        index=index,
        env=template_env(prefix, has_experiment=config.experiment is not None),
        lease_timeout=config.lease_timeout,
        experiment=config.experiment,
        experiment_steps=experiment_steps,
    )

    async def not_found(request: Request, exc: HTTPException) -> HTMLResponse:
        return site.render("error.html", request, status_code=exc.status_code, message=exc.detail)

    routes = [
        Route("/", partial(outputs.outputs, site)),
        Route("/output/{rel:path}", partial(outputs.output, site)),
        Route("/log/{rel:path}", partial(outputs.log, site)),
        Route("/lineage/{rel:path}", partial(lineage.lineage, site)),
        Route("/diff", partial(outputs.diff, site)),
        Route("/experiment", partial(plan.experiment, site)),
        Route("/runs", partial(runs.runs, site)),
        Route("/data", partial(data.data, site)),
        Route("/data/{rel:path}", partial(data.data, site)),
        Route("/evals", partial(evals.evals, site)),
        Route("/evals/{rel:path}", partial(evals.evaluation, site)),
        Route("/gaps", partial(gaps.gaps, site)),
        Route("/gaps/{rel:path}", partial(gaps.gap, site)),
        Route("/scaling", partial(scaling.fits, site)),
        Route("/scaling/{rel:path}", partial(scaling.fit, site)),
        Route("/plot/{rel:path}", partial(scaling.plot, site)),
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
