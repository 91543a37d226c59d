"""`marin gc PREFIX`: delete what the records prove is garbage, never what a name suggests.

Candidates, found by walking the prefix for record files:
- moved-aside copies: folders whose `.marin_aside` record is readable and names exactly that folder
  (see `marin.execution.aside`);
- older hashed versions of a step: outputs at `{name}-{key8}` (the status's name and key spell the
  folder's name) beyond the `keep_latest` most recent of that step name, that no kept output depends
  on (by its `.executor_info` deps, or the deps its RUNNING event recorded).

Never deleted: the latest SUCCESS output of each name, anything a kept output depends on
(transitively), an output with a live lease, a folder at a fixed `output_path`, and any folder
whose record cannot be read. Nothing is deleted unless asked (`delete=True`, `marin gc --yes`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import storage
from marin.execution.artifact import read_info
from marin.execution.aside import ASIDE_RECORD, read_aside
from marin.execution.errors import UnreadableRecordError
from marin.execution.lease import current_holder, is_lease_file
from marin.execution.outputs import default_output_name
from marin.execution.states import StepState
from marin.execution.status import STATUS_FILE, StatusRecord, read_status


@dataclass(frozen=True)
class Garbage:
    """One folder gc deletes: its path, why, and its size in bytes."""

    path: str
    why: str
    size: int


@dataclass
class GcReport:
    """What gc found: the folders it deletes (or would), and the folders it keeps with the reason."""

    garbage: list[Garbage] = field(default_factory=list)
    kept: list[tuple[str, str]] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        """Total size of the garbage."""
        return sum(g.size for g in self.garbage)


@dataclass
class _Output:
    path: str
    name: str
    key: str
    state: StepState
    when: float
    deps: tuple[str, ...] | None  # paths and keys of its dependencies; None: unknown (no readable record)


def collect(prefix: str, keep_latest: int = 1, delete: bool = False, lease_timeout: float = 60.0) -> GcReport:
    """Find (and with `delete`, delete) the garbage under `prefix`; see the module docstring."""
    if keep_latest < 1:
        raise ValueError(f"keep_latest must be at least 1, got {keep_latest}")
    root = storage.absolute(prefix)
    report = GcReport()
    outputs: list[_Output] = []
    wanted = lambda n: n == STATUS_FILE or n == ASIDE_RECORD or is_lease_file(n)  # noqa: E731
    found = list(storage.find_dirs_with(root, wanted))
    # On a bucket each output's records are round trips: examine many outputs at once.
    for kind, value in storage.overlapped(lambda d: _examine(*d, lease_timeout), found, where=root):
        if kind == "garbage":
            report.garbage.append(value)
        elif kind == "kept":
            report.kept.append(value)
        else:
            outputs.append(value)
    report.garbage += _old_versions(outputs, keep_latest, report.kept)
    if delete:
        for g in report.garbage:
            storage.remove_tree(g.path)
    return report


def _examine(path: str, names: list[str], lease_timeout: float) -> tuple[str, Any]:
    """One output directory: ("garbage", Garbage), ("kept", (path, why)) or ("output", _Output)."""
    if ASIDE_RECORD in names:
        record = read_aside(path)
        if record is not None:
            return "garbage", Garbage(path, f"moved aside ({record.kind}: {record.reason})", _size(path))
        return "kept", (path, "its .marin_aside record is unreadable or does not name this folder")
    if any(is_lease_file(n) for n in names) and current_holder(path, lease_timeout) is not None:
        return "kept", (path, "a live runner holds its lease")
    try:
        status = read_status(path, strict=True)
    except UnreadableRecordError as e:
        return "kept", (path, f"unreadable status ({e.why})")
    if status is None:
        return "kept", (path, "no status record")
    return "output", _output(path, status)


def _output(path: str, status: StatusRecord) -> _Output:
    when = status.events[-1].time if status.events else 0.0
    info = read_info(path)
    deps: tuple[str, ...] | None = None
    if info is not None:
        deps = tuple(v for d in info.deps for v in (d.path, d.key) if v)
    else:
        started = [e for e in status.events if e.deps is not None]
        if started:
            deps = started[-1].deps
    return _Output(path, status.name, status.key, status.state, when, deps)


def _old_versions(outputs: list[_Output], keep_latest: int, kept: list[tuple[str, str]]) -> list[Garbage]:
    by_name: dict[str, list[_Output]] = {}
    for o in outputs:
        by_name.setdefault(o.name, []).append(o)
    keep: set[str] = set()
    candidates: list[_Output] = []
    for name, versions in by_name.items():
        versions.sort(key=lambda o: o.when, reverse=True)
        latest_success = next((o for o in versions if o.state == StepState.SUCCESS), None)
        for rank, o in enumerate(versions):
            hashed = bool(o.key) and storage.basename(o.path) == default_output_name(
                storage.basename(name), o.key
            )
            if rank < keep_latest or o is latest_success or not hashed:
                keep.add(o.path)
            else:
                candidates.append(o)
    # What kept outputs depend on stays, transitively.
    by_path = {o.path: o for o in outputs}
    unknown = [o.path for o in outputs if o.path in keep and o.deps is None]
    if unknown:
        for o in candidates:
            kept.append(
                (
                    o.path,
                    f"a kept output without a readable record of its dependencies ({unknown[0]}) may need it",
                )
            )
        return []
    # Dependencies are matched by path, and by key too (a prefix copied elsewhere keeps its old paths).
    by_key = {o.key: o.path for o in outputs if o.key}
    stack = list(keep)
    while stack:
        o = by_path.get(stack.pop())
        if o is None:
            continue
        for dep in o.deps or ():
            dep = by_key.get(dep, dep)
            if dep not in keep:
                keep.add(dep)
                stack.append(dep)
    garbage = []
    for o in candidates:
        if o.path in keep:
            kept.append((o.path, "a kept output depends on it"))
        else:
            garbage.append(
                Garbage(
                    o.path, f"an older version of step {o.name!r} ({o.state}, key {o.key[:8]})", _size(o.path)
                )
            )
    return garbage


def _size(path: str) -> int:
    return sum(size for _, size in storage.walk_files(path))


def format_bytes(n: int) -> str:
    """'512 B', '3.4 KiB', '1.2 GiB'."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"
