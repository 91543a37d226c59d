"""Reading the records back: the status of every output under a prefix, and how one output was made."""

from __future__ import annotations

import difflib
import posixpath
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import storage
from marin.execution.artifact import ArtifactRecord, ExecutorInfo, read_artifact, read_info
from marin.execution.aside import ASIDE_RECORD, read_aside
from marin.execution.errors import MarinError, UnreadableRecordError, first_line
from marin.execution.lease import current_holder, is_lease_file
from marin.execution.states import OutputState, StepState
from marin.execution.status import STATUS_FILE, Event, StatusRecord, read_status


@dataclass(frozen=True)
class OutputStatus:
    """One step output found under a prefix."""

    path: str
    name: str
    state: OutputState
    age_s: float | None
    duration_s: float | None
    detail: str = ""
    headline: str = ""
    superseded: bool = False
    compute: str = ""


def list_outputs(
    prefix: str, lease_timeout: float = 60.0, include_superseded: bool = False
) -> list[OutputStatus]:
    """Every step output under `prefix` (directories with a status or a lease), sorted by path.

    Moved-aside copies (an older output moved aside when its path got a new key, or the contents of
    an output whose status was unreadable; see `marin.execution.aside`) are left out unless
    `include_superseded`. An unreadable status shows as UNREADABLE with the reason.
    """
    now = time.time()
    found = list(storage.find_dirs_with(prefix, is_output_record))
    # On a bucket each output's records are round trips: read many outputs at once.
    rows = storage.overlapped(lambda d: output_status(d[0], d[1], now, lease_timeout), found, where=prefix)
    rows = [r for r in rows if include_superseded or not r.superseded]
    rows.sort(key=lambda r: r.path)
    return rows


def is_output_record(name: str) -> bool:
    """Whether a file name marks its directory as a step output (a status, a lease or a moved-aside record)."""
    return name == STATUS_FILE or name == ASIDE_RECORD or is_lease_file(name)


def output_status(path: str, names: list[str], now: float, lease_timeout: float = 60.0) -> OutputStatus:
    """The status row of the one output at `path`, whose directory holds the files `names`.

    A moved-aside copy (see `marin.execution.aside`) is marked `superseded`; an unreadable status
    shows as UNREADABLE with the reason.
    """
    aside = read_aside(path) if ASIDE_RECORD in names else None
    superseded = aside is not None
    try:
        status = read_status(path, strict=not superseded) if STATUS_FILE in names else None
    except UnreadableRecordError as e:
        return OutputStatus(
            path,
            storage.basename(path),
            OutputState.UNREADABLE,
            None,
            None,
            f"unreadable status ({e.why}); the next run moves the folder's contents aside",
        )
    events = status.events if status is not None else ()
    has_lease = any(is_lease_file(n) for n in names)
    holder = current_holder(path, lease_timeout) if has_lease else None
    if holder is not None:
        state, detail = OutputState.RUNNING, f"lease held by {holder.describe()}"
        age = now - holder.acquired
    elif status is not None:
        state, detail = OutputState.INTERRUPTED, ""
        age = now - events[-1].time if events else None
        if status.state == StepState.RUNNING:  # no live holder: the attempt died without recording an end
            detail = "an attempt died before finishing; the next run retries it"
        elif status.state == StepState.LOST:
            detail = "its process was lost (killed from outside, or its node); the next run retries it"
        else:
            state = OutputState(status.state)
            detail = first_line(events[-1].error) if events and events[-1].error else ""  # a failure's line
            if has_lease and not detail:
                detail = "a stale lease remains from an interrupted attempt"
    else:
        state, detail, age = OutputState.INTERRUPTED, "a first attempt died before finishing", None
    name = (status.name if status is not None else "") or (holder.step if holder else storage.basename(path))
    artifact = read_artifact(path) if state == OutputState.SUCCESS else None
    shown, spent = headline(artifact), compute(artifact)
    warned = (
        artifact.result.get("warnings")
        if artifact is not None and isinstance(artifact.result, dict)
        else None
    )
    if isinstance(warned, list) and warned:  # a step's own warnings (e.g. a quality score's health checks)
        detail = "; ".join(filter(None, [detail, "warning: " + "; ".join(map(str, warned))]))
    if superseded:
        state = state if status is not None else OutputState.MOVED_ASIDE
        detail = f"moved-aside copy ({aside.kind}) of {aside.origin} (delete with `marin gc PREFIX --yes`)"
    preempted = preemptions(events)
    if preempted:
        detail = "; ".join(
            filter(None, [detail, f"preempted {len(preempted)}x (a replica or node lost; retried)"])
        )
    return OutputStatus(path, name, state, age, _duration(events), detail, shown, superseded, spent)


def preemptions(events: Sequence[Event]) -> list[dict[str, Any]]:
    """The preemptions of the latest attempt: gang restarts after a lost replica, counted apart from failures."""
    latest = max(
        (i for i, e in enumerate(events) if e.state == StepState.RUNNING and e.preempted is None), default=0
    )
    return [e.preempted for e in events[latest:] if e.preempted is not None]


def headline(artifact: ArtifactRecord | None) -> str:
    """A step's headline metric as 'metric = value', when its result declares one.

    A step opts in by returning `{"headline": {"metric": NAME, "value": NUMBER}, ...}` (evaluations,
    training, token caches, curation and zephyr steps do), with, when it has them, the `ci95`
    interval and the `n` it rests on, shown beside the value, and a `warning` a reader of the number
    must see (a scaling fit's extrapolation), shown after it; the engine attaches no meaning to it.
    """
    result = artifact.result if artifact is not None else None
    shown = result.get("headline") if isinstance(result, dict) else None
    if not isinstance(shown, dict) or "metric" not in shown:
        return ""
    value = shown.get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{shown['metric']} = {value}"
    text = f"{shown['metric']} = {value:,}" if isinstance(value, int) else f"{shown['metric']} = {value:.4g}"
    ci, n = shown.get("ci95"), shown.get("n")
    extra = []
    if isinstance(ci, list | tuple) and len(ci) == 2 and all(isinstance(v, int | float) for v in ci):
        extra.append(f"95% CI {ci[0]:.4g}-{ci[1]:.4g}")
    if isinstance(n, int) and not isinstance(n, bool):
        extra.append(f"n={n:,}")
    warning = shown.get("warning")
    caution = f"; warning: {warning}" if isinstance(warning, str) and warning else ""
    return text + (f" ({', '.join(extra)})" if extra else "") + caution


def compute(artifact: ArtifactRecord | None) -> str:
    """A step's compute as 'M / H (ratio)': its model and hardware FLOPs, when its result records them.

    A step opts in by returning `{"flops": {"model": M, "hardware": H, "ratio": M / H}, ...}`
    (train steps do: the model's FLOPs and the devices' peak over the wall time, see
    `marin.training.flops`); the engine shows it and attaches no meaning to it.
    """
    result = artifact.result if artifact is not None else None
    flops = result.get("flops") if isinstance(result, dict) else None
    if not isinstance(flops, dict) or not all(_is_number(flops.get(k)) for k in ("model", "hardware")):
        return ""
    ratio = flops.get("ratio")
    shown = f"{flops['model']:.3g} / {flops['hardware']:.3g}"
    return shown + (f" ({ratio:.1%})" if _is_number(ratio) else "")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _duration(events: Sequence[Event]) -> float | None:
    start = next(
        (e.time for e in reversed(events) if e.state == StepState.RUNNING and e.preempted is None), None
    )
    end = events[-1].time if events and events[-1].state != StepState.RUNNING else None
    return end - start if start is not None and end is not None else None


def format_seconds(seconds: float | None) -> str:
    """'3.2s', '4m10s', '2h05m', '3d04h' or '-'."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    if seconds < 86400:
        return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"
    return f"{int(seconds // 86400)}d{int(seconds % 86400 // 3600):02d}h"


@dataclass(frozen=True)
class OutputRecords:
    """The records of one output: its status, info and artifact (each None when missing)."""

    path: str
    status: StatusRecord | None
    info: ExecutorInfo | None
    artifact: ArtifactRecord | None

    def to_json(self) -> dict[str, Any]:
        """The records as plain JSON data, as their files hold them."""
        return {
            "path": self.path,
            **{
                name: None if record is None else record.to_json()
                for name, record in (
                    ("status", self.status),
                    ("info", self.info),
                    ("artifact", self.artifact),
                )
            },
        }


def find_output(name_or_path: str, prefix: str) -> str:
    """The output folder `name_or_path` names: itself when it holds a step's records, else the latest
    output of the step of that name under `prefix` (its SUCCESS outputs first, then by the time of
    its last event), as `marin info NAME` / `marin verify NAME` take it.

    MarinError naming what was looked for, and the step names found beside it, when there is none.
    """
    path = storage.absolute(name_or_path)
    if storage.is_dir(path) and any(is_output_record(n) for n in storage.list_names(path)):
        return path
    name = name_or_path.strip("/")
    folder = storage.join(prefix, posixpath.dirname(name)) if posixpath.dirname(name) else prefix
    stem = posixpath.basename(name)
    found: list[tuple[bool, float, str]] = []
    others: set[str] = set()  # the step names the folder's outputs are named for
    children = storage.list_names(folder) if storage.is_dir(folder) else []
    for child in children:
        base, _, suffix = child.rpartition("-")  # an output folder is {name}-{key[:8]}
        if not base or len(suffix) != 8:
            continue
        if base != stem:
            others.add(posixpath.join(posixpath.dirname(name), base))
            continue
        status = read_status(storage.join(folder, child))
        if status is None or status.name != name:
            continue
        last = status.events[-1].time if status.events else 0.0
        found.append((status.state == StepState.SUCCESS, last, storage.join(folder, child)))
    if found:
        return max(found)[2]
    if storage.is_dir(path):
        output_records(path)  # raises, saying the folder holds no step output
    close = difflib.get_close_matches(name, sorted(others), n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    raise MarinError(
        f"{name_or_path} is neither an output folder nor the name of a step with an output under {prefix}"
        f"{hint} (`marin status {prefix}` lists them)"
    )


def output_records(path: str) -> OutputRecords:
    """The status, info and artifact of one output; MarinError when `path` holds no step output."""
    path = storage.absolute(path)
    try:
        status = read_status(path, strict=True)
    except UnreadableRecordError as e:
        raise MarinError(f"{e}; the next run of its step moves the folder's contents aside") from None
    info, artifact = read_info(path), read_artifact(path)
    if status is None and info is None:
        raise MarinError(
            f"{path} holds no step output (no .executor_status or .executor_info); "
            "give the output directory of a step, e.g. one listed by `marin status PREFIX`"
        )
    return OutputRecords(path, status, info, artifact)


def explain_output(path: str) -> str:
    """A readable account of how the output at `path` was made, from its records."""
    records = output_records(path)
    status, info, artifact = records.status, records.info, records.artifact
    state = status.state if status is not None else None
    lines = [
        f"output   {records.path}",
        f"step     {info.name if info is not None else status.name}",
        f"state    {state or 'unknown'}"
        + ("" if state == StepState.SUCCESS else "  (records below are from an unfinished run)"),
        f"key      {info.key if info is not None else status.key}",
    ]
    if info is not None:
        code = f"version {info.version!r}" if info.version else f"fingerprint {info.code_fingerprint}"
        lines.append(f"code     {info.fn}  ({code})")
        git = info.git or {}
        if git.get("commit"):
            lines.append(f"git      {git['commit']}" + ("  (dirty working tree)" if git.get("dirty") else ""))
        experiment = git.get("experiment") or {}
        if experiment.get("note") and not experiment.get("commit"):
            lines.append(f"exp git  {experiment['note']}  ({experiment.get('directory')})")
        if experiment.get("commit"):
            lines.append(
                f"exp git  {experiment['commit']}"
                + ("  (dirty working tree)" if experiment.get("dirty") else "")
                + f"  in {experiment.get('directory')}"
            )
        lines.append(f"params   {_json(info.hash_attrs)}")
        for dep in info.deps:
            lines.append(f"input    {dep.name}  key {dep.key[:12]}  at {dep.path}")
        lines += _declared_inputs((info.key_record or {}).get("inputs"))
        env = info.environment or {}
        packages = ", ".join(f"{k} {v}" for k, v in (env.get("packages") or {}).items())
        lines.append(f"python   {env.get('python')}  ({packages})")
        lines.append(f"ran on   {env.get('host')} as {env.get('user')}, resources {_json(info.resources)}")
        lines.append(
            f"time     {_when(info.start_time)} -> {_when(info.end_time)}  ({format_seconds(info.duration_s)})"
        )
    if artifact is not None:
        files = artifact.files
        if headline(artifact):
            lines.append(f"headline {headline(artifact)}")
        if compute(artifact):
            lines.append(f"compute  {compute(artifact)}  (model / hardware FLOPs)")
        lines.append(f"result   {_json(artifact.result)}")
        lines.append(f"files    {len(files)} files, {artifact.total_bytes} bytes")
        lines += [f"           {f['path']}  {f['size']} B" for f in files[:20]]
        if len(files) > 20:
            lines.append(f"           ... and {len(files) - 20} more")
    for e in status.events if status is not None else ():
        lines.append(
            f"event    {_when(e.time)}  {e.state:<8} {e.host}:{e.pid}"
            + (f"  {first_line(e.error)}" if e.error else "")
            + (f"  {_preemption_line(e.preempted)}" if e.preempted is not None else "")
        )
    return "\n".join(lines)


def _declared_inputs(inputs: dict[str, Any] | None, shown: int = 20) -> list[str]:
    """The `inputs=` files a key covers (name, size, digest) and the hub datasets with their revision."""
    if not inputs:
        return []
    files = inputs.get("files") or {}
    lines = [f"inputs   {len(files)} declared files (name, size, digest)"]
    lines += [
        f"           {name}  {e.get('size')} B  {e.get('digest')}" for name, e in list(files.items())[:shown]
    ]
    if len(files) > shown:
        lines.append(f"           ... and {len(files) - shown} more")
    for dataset, revision in (inputs.get("hub") or {}).items():
        lines.append(f"hub      {dataset}  " + (f"revision {revision}" if revision else "unpinned"))
    return lines


def _preemption_line(p: dict[str, Any]) -> str:
    replica = "a replica" if p.get("replica") is None else f"replica {p['replica']}"
    node = f" on node {p['node']}" if p.get("node") else ""
    return f"preempted: lost {replica}{node}; retry {p.get('retry')} of {p.get('of')}: {str(p.get('error'))[:160]}"


def _json(value: Any) -> str:
    import orjson

    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else "-"
