"""The name of a step's default output folder, `{name}-{key8}`: the one formula the plan writes by
and `marin gc` and the plan's "what changed" lookup read back."""

from __future__ import annotations

from marin.execution import storage

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
