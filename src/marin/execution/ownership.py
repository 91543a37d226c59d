"""What a step's output folder may be: the checks that keep the engine from touching bytes it did not write.

Used by the plan (errors before anything runs) and again by the runner under the step's lease
(the folder may have changed since the plan):
- `foreign_entries`: what is in an output folder that is not the engine's own lease bookkeeping;
- `check_no_symlinks`: no symlink on the output's path inside the prefix, nor the output itself;
- `check_not_nested_in_records`: the output neither sits inside nor contains another recorded output.
"""

from __future__ import annotations

import os
import stat

import storage
from marin.execution.errors import DagError
from marin.execution.lease import is_lease_file
from marin.execution.status import STATUS_FILE, is_status_temp, read_status


def foreign_entries(output_path: str) -> list[str]:
    """The names in `output_path` other than lease files and status temporaries (sorted)."""
    return sorted(
        n for n in storage.list_names(output_path) if not is_lease_file(n) and not is_status_temp(n)
    )


def check_no_symlinks(step: str, prefix: str, output_path: str) -> None:
    """DagError naming the link if the output folder, or any folder between the prefix and it, is a
    symlink: writing or clearing through it could touch bytes outside the prefix."""
    if not storage.is_local(output_path) or not output_path.startswith(prefix + "/"):
        return
    path = prefix
    for part in output_path[len(prefix) + 1 :].split("/"):
        path = f"{path}/{part}"
        try:
            mode = os.lstat(path).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return
        if stat.S_ISLNK(mode):
            raise DagError(
                f"step {step!r}: its output path {output_path} goes through the symlink {path} "
                f"(-> {os.readlink(path)}); marin never writes or clears through a link, which could touch "
                "files outside the prefix. Replace the link with a real folder, or give the step another output_path"
            )


def check_not_nested_in_records(step: str, prefix: str, output_path: str) -> None:
    """DagError naming both if the output would sit inside a recorded output folder (one holding an
    `.executor_status`) under the prefix, or would contain one: a rerun clears or moves its folder."""
    if not output_path.startswith(prefix + "/"):
        return
    path = output_path
    while (cut := path.rfind("/")) > len(prefix):
        path = path[:cut]
        if storage.exists(f"{path}/{STATUS_FILE}"):
            status = read_status(path)
            other = status.name if status is not None else "?"
            raise DagError(
                f"step {step!r}: its output {output_path} would sit inside {path}, the recorded output of step "
                f"{other!r}; outputs must not nest (a rerun clears or moves a whole folder): "
                "give it another output_path"
            )
    for name in foreign_entries(output_path):
        for inner, _ in storage.find_dirs_with(f"{output_path}/{name}", lambda n: n == STATUS_FILE):
            status = read_status(inner)
            other = status.name if status is not None else "?"
            raise DagError(
                f"step {step!r}: its output {output_path} would contain {inner}, the recorded output of step "
                f"{other!r}; outputs must not nest (a rerun clears or moves a whole folder): "
                "give it another output_path"
            )
