"""The data pages: folders, record files (jsonl, txt, parquet) and token caches under the prefix."""

from __future__ import annotations

import os
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse

import storage
from marin.ui import data as data_pages
from marin.ui.index import LEDGER_FILE, STATS_FILE, artifact_of
from marin.ui.paths import is_dir, read_json_capped
from marin.ui.site import Site, _int

LISTING_CAP = 1000  # entries of one folder the data page lists


def data(site: Site, request: Request) -> HTMLResponse:
    rel = request.path_params.get("rel", "")
    path = site.locate(rel)
    q = request.query_params
    start, size = max(0, _int(q.get("start"), 0)), min(200, max(1, _int(q.get("size"), 20)))
    context: dict[str, Any] = {"rel": rel.strip("/"), "start": start, "size": size, "query": dict(q)}
    if not is_dir(path):
        if not data_pages.is_browsable(path):
            raise HTTPException(404, f"{rel!r} is not a jsonl, txt or parquet file")
        # resolve() followed any links to a target inside the prefix; open that target itself.
        real = os.path.realpath(storage.local_path(path)) if storage.is_local(path) else path
        try:
            page = data_pages.page_file(real, start, size)
        except storage.NotRegularFile as e:
            raise HTTPException(
                404, f"{rel!r} is unreadable: {e.strerror}; the UI reads only regular files"
            ) from None
        return site.render("data.html", request, mode="file", page=page, **context)
    names = storage.list_names(path)
    if LEDGER_FILE in names:
        cache_splits = (read_json_capped(f"{path}/{LEDGER_FILE}") or {}).get("splits") or {}
        split = q.get("split") or next(iter(cache_splits), "train")
        if split not in cache_splits:
            raise HTTPException(404, f"the token cache has no split {split!r}")
        try:
            cache, page = data_pages.page_token_cache(path, split, start, size, q.get("ids") == "1")
        except storage.NotRegularFile as e:
            raise HTTPException(
                404,
                f"the token cache's {e.filename} is unreadable: {e.strerror}; the UI reads only regular files",
            ) from None
        return site.render(
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
    entry = site.index.get(path)
    artifact = artifact_of(path) if entry is not None else None
    stats = read_json_capped(f"{path}/{STATS_FILE}") if STATS_FILE in names else None
    health = stats.get("health") if isinstance(stats, dict) else None
    if health is not None:
        context["health"] = health
        bucket = q.get("bucket")
        if bucket in data_pages.BUCKETS:
            documents = _input_documents(entry)
            context["bucket"] = bucket
            context["page"] = data_pages.page_by_score(path, documents, bucket, start, size)
    return site.render(
        "data.html",
        request,
        mode="dir",
        listing=listing,
        artifact=artifact,
        stats=stats,
        more=max(0, len(names) - LISTING_CAP),
        **context,
    )


def _input_documents(entry) -> list[str]:
    """The document files a score step read: the record files of its dependencies' outputs."""
    files: list[str] = []
    for dep in entry.info.deps if entry is not None and entry.info is not None else ():
        for rel, _size in storage.walk_files(dep.path):
            name = rel.rsplit("/", 1)[-1]
            if name.startswith("part-") and data_pages.is_browsable(name) and not rel.startswith("_"):
                files.append(storage.join(dep.path, rel))
    return sorted(files)
