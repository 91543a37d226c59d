"""The evaluation pages: models side by side per metric with their intervals, and one evaluation's results."""

from __future__ import annotations

from urllib.parse import quote

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse

from marin.evaluation.compare_render import interval, number
from marin.evaluation.errors import EvalDataError
from marin.evaluation.results import ITEMS_FILE, EvaluationResults, decode_items, decode_results
from marin.execution.errors import UnreadableRecordError
from marin.ui import data as data_pages
from marin.ui.index import RESULTS_FILE, Entry, artifact_of
from marin.ui.paths import NotFound, is_dir, read_capped, resolve
from marin.ui.site import Site

HARNESS_SAMPLES_SHOWN = 5  # per-sample records of each harness task the evaluation page shows inline
ITEMS_CAP = 64 << 20  # bytes of an items.json the page reads to put a configuration's interval together


def evals(site: Site, request: Request) -> HTMLResponse:
    """Every evaluation's headline and configuration; the configurations trained with several seeds, each
    metric's mean over the seeds with its interval (seed and item noise) and the seeds' spread; then each
    metric with the configurations and models side by side, ranked by the interval's worse end (the lower
    bound when higher is better, the upper bound when lower is), each interval drawn as a bar."""
    from marin.evaluation.compare import group_replicates, ranked
    from marin.evaluation.comparison import Evaluated
    from marin.evaluation.differences import configuration_means
    from marin.evaluation.replicates import Configuration, configuration_of

    rows, evaluated, entries = [], [], {}
    for e in site.index.entries(include_superseded=False):
        if e.kind != "eval":
            continue
        results = read_results(e.row.path)
        metrics = results.flat_metrics() if results is not None else {}
        model = results.model.label if results is not None and results.model is not None else ""
        artifact = artifact_of(e.row.path)
        result = artifact.result if artifact is not None and isinstance(artifact.result, dict) else {}
        headline = result.get("headline") or {}
        configuration = configuration_of(e.info) if e.info is not None else Configuration(e.row.path, {})
        name = e.info.name if e.info is not None else e.row.name
        evaluated.append(
            Evaluated(e.row.name, e.row.path, {}, metrics, name=name, configuration=configuration)
        )
        entries[e.row.path] = (e, model)
        rows.append({"entry": e, "model": model, "data": evaluated_on(results), "headline": headline})
    groups = group_replicates(evaluated)
    configuration_of_path = {m.path: g for g in groups for m in g.members}
    for row in rows:
        group = configuration_of_path[row["entry"].row.path]
        row["configuration"] = f"{group.label} ({len(group.members)} seeds)" if len(group.members) > 1 else ""
    replicated = [_with_items(g) for g in groups if len(g.members) > 1]
    configurations = []
    metrics = list(dict.fromkeys(m for ev in evaluated for m in ev.metrics))
    for metric in metrics:
        means = [r for r in configuration_means(replicated, metric) if r.seeds > 1] if replicated else []
        if means:
            configurations.append({"metric": metric, "rows": means})
    side_by_side = []
    for metric in metrics:
        order = ranked(evaluated, metric)
        shown = [ev.metrics[metric] for ev in order]
        means = next((c["rows"] for c in configurations if c["metric"] == metric), [])
        ends = [x for m in shown for x in (m.ci95 or (m.value, m.value)) if isinstance(x, (int, float))]
        ends += [x for r in means for x in (r.ci95 or (r.value, r.value)) if isinstance(x, (int, float))]
        lo, hi = (min(ends), max(ends)) if ends else (0.0, 1.0)
        span = (hi - lo) or 1.0
        higher = shown[0].higher_is_better
        means = sorted(means, key=lambda r: _worse_end(r, higher), reverse=True)
        side_by_side.append(
            {
                "metric": metric,
                "higher_is_better": higher,
                "configurations": [{"row": r, "bar": _bar(r, lo, span)} for r in means],
                "rows": [
                    {
                        "entry": entries[ev.path][0],
                        "model": entries[ev.path][1],
                        "configuration": configuration_of_path[ev.path].label,
                        "metric": m,
                        "bar": _bar(m, lo, span),
                    }
                    for ev, m in zip(order, shown, strict=True)
                ],
                "axis": (lo, hi),
            }
        )
    return site.render(
        "evals.html",
        request,
        rows=rows,
        configurations=configurations,
        groups=side_by_side,
        num=number,
        interval=interval,
    )


def _with_items(group):
    """A group of replicates with each member's per-item scores, read as records are (capped, regular
    files only); a member whose items cannot be read keeps none (its configuration's interval then
    counts the seeds alone)."""
    import dataclasses

    from marin.evaluation.comparison import Group

    members = []
    for m in group.members:
        try:
            data = read_capped(f"{m.path}/{ITEMS_FILE}", ITEMS_CAP)
            items = decode_items(data).scores() if data is not None else {}
        except (UnreadableRecordError, EvalDataError):
            items = {}
        members.append(dataclasses.replace(m, items=items))
    return Group(group.label, tuple(members))


def _worse_end(row, higher: bool) -> float:
    ci = row.ci95
    value = (ci[0] if higher else ci[1]) if ci else row.value
    return value if higher else -value


def read_results(output_path: str) -> EvaluationResults | None:
    """An output's `results.json` as the typed record, read as records are (capped, regular files
    only); None when it is missing or not an evaluation's."""
    try:
        data = read_capped(f"{output_path}/{RESULTS_FILE}")
        return decode_results(data) if data is not None else None
    except (UnreadableRecordError, EvalDataError):
        return None


def evaluated_on(results: EvaluationResults | None, shown: int = 4) -> str:
    """What an evaluation scored: its suite, else its harness tasks, then its perplexity datasets, exact match."""
    if results is None:
        return ""
    names = [results.suite.name] if results.suite is not None else list(results.harness)
    names += list(results.perplexity.datasets) if results.perplexity is not None else []
    names += [results.exact_match.task] if results.exact_match is not None else []
    more = f" (+{len(names) - shown} more)" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _bar(metric, lo: float, span: float) -> dict | None:
    """Where the interval and the value of a metric (or a configuration's mean) sit on the group's axis,
    in percent (None without an interval)."""
    ci, value = metric.ci95, metric.value
    if not ci or not isinstance(value, (int, float)) or ci[0] is None or ci[1] is None:
        return None
    return {
        "lo": 100 * (ci[0] - lo) / span,
        "width": max(0.5, 100 * (ci[1] - ci[0]) / span),
        "value": 100 * (value - lo) / span,
    }


def evaluation(site: Site, request: Request) -> HTMLResponse:
    entry = site.entry_at(request.path_params["rel"])
    results = read_results(entry.row.path)
    if results is None:
        raise HTTPException(404, f"{entry.rel!r} holds no {RESULTS_FILE}")
    return site.render(
        "evaluation.html",
        request,
        entry=entry,
        results=results,
        samples_page=f"/data/{quote(entry.rel)}/samples.jsonl",
        harness_samples=harness_samples_of(site, entry, results),
        num=number,
        interval=interval,
        curves=checkpoint_curves(results),
    )


def checkpoint_curves(results: EvaluationResults, width: float = 300.0, height: float = 90.0) -> list[dict]:
    """Each metric's curve over an evaluation's checkpoints as SVG coordinates: the values as a line,
    the 95% intervals as a band, x by training tokens (or steps)."""
    curves = results.checkpoints.curves if results.checkpoints is not None else {}
    drawn = []
    for metric, points in curves.items():
        xs = [p.tokens or p.step for p in points]
        values = [p.value for p in points]
        ends = [x for p in points for x in (p.ci95 or (p.value, p.value)) if isinstance(x, (int, float))]
        if not ends or not all(isinstance(v, (int, float)) for v in values):
            continue
        lo, hi, x0, x1 = min(ends), max(ends), min(xs), max(xs)

        def at(x, y, lo=lo, hi=hi, x0=x0, x1=x1):
            return (
                round(width * (x - x0) / ((x1 - x0) or 1), 1),
                round(height - height * (y - lo) / ((hi - lo) or 1), 1),
            )

        line = " ".join(f"{a},{b}" for a, b in (at(x, v) for x, v in zip(xs, values, strict=True)))
        upper = [at(x, (p.ci95 or (v, v))[1]) for x, v, p in zip(xs, values, points, strict=True)]
        lower = [at(x, (p.ci95 or (v, v))[0]) for x, v, p in zip(xs, values, points, strict=True)]
        band = " ".join(f"{a},{b}" for a, b in upper + lower[::-1])
        drawn.append({"metric": metric, "points": points, "line": line, "band": band, "range": (lo, hi)})
    return drawn


def harness_samples_of(site: Site, entry: Entry, results: EvaluationResults) -> list[dict]:
    """Each harness task's per-sample file the results name: its data page and first records."""
    shown = []
    for task, file in results.harness_samples.items():
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
