"""Moving an output's contents aside instead of deleting them, and recognising such copies later.

A runner never deletes a finished output or bytes it cannot read a record for. When an output's
path is reused (a new key at a fixed `output_path`, `force_run`) or its status is unreadable, its
contents move to a sibling folder named by `aside_name`, and a record (`.marin_aside`) inside says
what the folder was and why it was moved. `marin gc` deletes a folder as a moved-aside copy only
when that record is readable and the folder's name is the one `aside_name` gives for it: a folder
that merely looks like one (`models/release.superseded-by-v2-2024`) is never touched.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import StrEnum

import msgspec

import storage
from marin.execution.records import JsonRecord, read_typed

ASIDE_RECORD = ".marin_aside"


class AsideKind(StrEnum):
    """Why a folder's contents were moved aside."""

    SUPERSEDED = "superseded"  # a SUCCESS output replaced by a new key or by force_run
    UNREADABLE = "unreadable"  # the output of an attempt whose .executor_status could not be read


class AsideRecord(JsonRecord, frozen=True, kw_only=True):
    """The parsed `.marin_aside` of a moved-aside copy: what it was, and why it was moved."""

    kind: AsideKind
    origin: str = msgspec.field(name="from")  # the output path its contents were moved from
    step: str
    key: str
    stamp: str
    reason: str = ""
    time: float = 0.0
    moved: list[str] = msgspec.field(default_factory=list)


def aside_name(original_name: str, kind: AsideKind, key: str, stamp: str) -> str:
    """The folder name of a moved-aside copy of the output folder `original_name`: the one formula
    both the writer (`move_aside`) and `marin gc` (`read_aside`) use."""
    return f"{original_name}.{kind}-{(key or 'nokey')[:8]}-{stamp}"


def free_aside_path(output_path: str, kind: AsideKind, key: str) -> tuple[str, str]:
    """A sibling path (and its stamp) for a moved-aside copy of `output_path` that nothing occupies yet."""
    base, n = str(int(time.time())), 0
    while True:
        stamp = base if n == 0 else f"{base}.{n}"
        path = f"{storage.parent(output_path)}/{aside_name(storage.basename(output_path), kind, key, stamp)}"
        if not storage.exists(path):
            return path, stamp
        n += 1


def move_aside(
    output_path: str,
    kind: AsideKind,
    key: str,
    step: str,
    reason: str,
    keep: Callable[[str], bool] = lambda name: False,
    target: str | None = None,
) -> str:
    """Move the entries of `output_path` (except those `keep` accepts) into a new sibling folder and
    write its `.marin_aside` record; return the folder. `target` is the path a plan announced; it is
    used when still free and spelled by `aside_name`."""
    path, stamp = free_aside_path(output_path, kind, key)
    if target is not None and not storage.exists(target):
        wanted_prefix = (
            f"{storage.parent(output_path)}/{aside_name(storage.basename(output_path), kind, key, '')}"
        )
        if target.startswith(wanted_prefix):
            path, stamp = target, target[len(wanted_prefix) :]
    storage.makedirs(path)
    moved = []
    for name in storage.list_names(output_path):
        if keep(name):
            continue
        storage.move(f"{output_path}/{name}", f"{path}/{name}")
        moved.append(name)
    record = AsideRecord(
        kind=kind,
        origin=output_path,
        step=step,
        key=key,
        stamp=stamp,
        reason=reason,
        time=time.time(),
        moved=sorted(moved),
    )
    storage.write_atomic(f"{path}/{ASIDE_RECORD}", record.to_bytes())
    return path


def read_aside(path: str) -> AsideRecord | None:
    """The record of a moved-aside copy at `path`, or None unless its record is readable and names
    exactly this folder (see `aside_name`)."""
    record = read_typed(f"{path}/{ASIDE_RECORD}", AsideRecord)
    if record is None:
        return None
    expected = aside_name(storage.basename(record.origin), record.kind, record.key, record.stamp)
    return record if storage.basename(path) == expected else None
