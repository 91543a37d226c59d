"""Deleting what a user asks to delete: superseded copies of step outputs.

A runner never deletes a finished output. When a step's output path is reused by a new key, the
old output is moved to a sibling `<output>.superseded-<key8>-<unix time>` directory (see
`step_execution._prepare_output`); these copies stay until `marin gc PREFIX --superseded`.
"""

from __future__ import annotations

import re

from marin.execution import storage
from marin.execution.status import STATUS_FILE

_SUPERSEDED = re.compile(r"\.superseded-[^/]*-\d+$")


def is_superseded(path: str) -> bool:
    """Whether `path` is a superseded copy of a step output rather than a live output."""
    return bool(_SUPERSEDED.search(storage.basename(path)))


def superseded_outputs(prefix: str) -> list[str]:
    """Every superseded copy of a step output under `prefix`, sorted."""
    found = storage.find_dirs_with(storage.absolute(prefix), lambda name: name == STATUS_FILE)
    return sorted(path for path, _ in found if is_superseded(path))


def delete_superseded(prefix: str, dry_run: bool = False) -> list[str]:
    """Delete (or with `dry_run`, only list) every superseded copy under `prefix`; return their paths."""
    paths = superseded_outputs(prefix)
    if not dry_run:
        for path in paths:
            storage.remove_tree(path)
    return paths
