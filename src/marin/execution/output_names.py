"""Where a step's output lives: `{prefix}/{output_path}`, or by default `{prefix}/{name}-{key8}`, the
one formula the plan writes by and `marin gc` and the plan's "what changed" lookup read back."""

from __future__ import annotations

import posixpath

import storage
from marin.execution.errors import DagError

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
