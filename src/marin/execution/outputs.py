"""Where step outputs live under a prefix, and what the plan finds there.

- The one formula for an output's path: `{prefix}/{output_path}`, or by default
  `{prefix}/{name}-{key8}`; the plan writes by it, and `marin gc` and the plan's "what changed"
  lookup read it back (`default_output_key`).
- The latest recorded key record of a step's name (for "what changed"), found through an index of
  each folder's default outputs by step name, built from that same listing.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import storage
from marin.execution.artifact import read_info
from marin.execution.errors import DagError

if TYPE_CHECKING:
    from marin.execution.step_spec import StepSpec

KEY_CHARS = 8  # characters of the key a default output folder's name carries


def default_output_name(name: str, key: str) -> str:
    """The default output folder of step `name` with `key`, relative to the prefix."""
    return f"{name}-{key[:KEY_CHARS]}"


def default_output_key(folder: str, name: str) -> str | None:
    """The key prefix spelled by `folder` (a folder's base name) when it is named as a default output
    of step `name`, else None."""
    stem = storage.basename(name) + "-"
    if folder.startswith(stem) and len(folder) == len(stem) + KEY_CHARS:
        return folder[len(stem) :]
    return None


def output_path_of(name: str, output_path: str | None, prefix: str, key: str) -> str:
    """`{prefix}/{output_path}` (normalised) or `{prefix}/{name}-{key8}`; DagError if it is the prefix."""
    if not output_path:
        return f"{prefix}/{default_output_name(name, key)}"
    relative = posixpath.normpath(output_path)
    if relative == ".":
        spelled = "" if output_path.strip("/") == "." else " (it normalises to '.')"
        raise DagError(
            f"step {name!r}: output_path {output_path!r}{spelled} is the prefix itself ({prefix}); a step's output "
            "is a folder of its own inside the prefix (a rerun clears or moves it): give a subfolder such as "
            f"{name!r}"
        )
    return f"{prefix}/{relative}"


class Versions:
    """The default output folders (`{name}-{key8}`) in each folder, indexed by the step's base name:
    built from one listing of the folder, shared by every step planned in it, so that finding a
    step's earlier versions costs a lookup, not a scan of the folder (a plan of 10,000 changed steps
    in one folder would otherwise compare 10,000 x 10,000 names)."""

    def __init__(self, listings: dict[str, list[str]]):
        self._listings = listings  # folder -> its names, shared with the plan's other listings
        self._by_stem: dict[str, dict[str, list[str]]] = {}

    def of(self, folder: str, stem: str) -> list[str]:
        """The names in `folder` of default outputs of a step whose name ends in `stem`."""
        index = self._by_stem.get(folder)
        if index is None:
            names = self._listings.get(folder)
            if names is None:
                names = self._listings[folder] = storage.list_names(folder)
            index = {}
            for n in names:
                if default_output_key(n, n[: -KEY_CHARS - 1]) is not None:
                    index.setdefault(n[: -KEY_CHARS - 1], []).append(n)
            self._by_stem[folder] = index
        return index.get(stem, [])


def latest_record(
    spec: StepSpec, output_path: str, prefix: str, versions: Versions
) -> tuple[str | None, Mapping[str, Any] | None]:
    """The most recent `.executor_info` key record of a step with this name under the prefix."""
    candidates = []
    if spec.output_path:
        candidates.append(output_path)
    default_dir = storage.parent(f"{prefix}/{spec.name}")
    candidates += [f"{default_dir}/{n}" for n in versions.of(default_dir, storage.basename(spec.name))]
    best: tuple[float, str, Mapping[str, Any]] | None = None
    for path in candidates:
        info = read_info(path)
        if info is None or info.name != spec.name or info.key_record is None:
            continue
        when = info.end_time or 0.0
        if best is None or when > best[0]:
            best = (when, path, info.key_record)
    return (best[1], best[2]) if best else (None, None)
