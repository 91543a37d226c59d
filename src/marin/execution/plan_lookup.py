"""What the plan looks up besides statuses: whether an output folder is there (one listing of the
folder above, shared by its new steps), and the latest recorded key record of a step's name (for
"what changed")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import storage
from marin.execution.artifact import read_info
from marin.execution.output_names import default_output_key
from marin.execution.step_spec import StepSpec


def folder_absent(path: str, present: dict[str, frozenset[str]]) -> bool:
    """Whether the folder above `path` (listed once per plan, its names kept in `present`) lacks it."""
    parent, _, name = path.rpartition("/")
    names = present.get(parent)
    if names is None:
        names = present[parent] = frozenset(storage.list_names(parent))
    return name not in names


def latest_record(
    spec: StepSpec, output_path: str, prefix: str, sibling_cache: dict[str, list[str]]
) -> tuple[str | None, Mapping[str, Any] | None]:
    """The most recent `.executor_info` key record of a step with this name under the prefix."""
    candidates = []
    if spec.output_path:
        candidates.append(output_path)
    default_dir = storage.parent(f"{prefix}/{spec.name}")
    if default_dir not in sibling_cache:
        sibling_cache[default_dir] = storage.list_names(default_dir)
    candidates += [
        f"{default_dir}/{n}"
        for n in sibling_cache[default_dir]
        if default_output_key(n, spec.name) is not None
    ]
    best: tuple[float, str, Mapping[str, Any]] | None = None
    for path in candidates:
        info = read_info(path)
        if info is None or info.name != spec.name or info.key_record is None:
            continue
        when = info.end_time or 0.0
        if best is None or when > best[0]:
            best = (when, path, info.key_record)
    return (best[1], best[2]) if best else (None, None)
