"""Preparing a step's output folder for a new attempt: what an earlier attempt left is cleared,
kept for a resumable step to resume from, or (a finished output) moved aside, never deleted."""

from __future__ import annotations

import storage
from marin.execution.aside import AsideKind, move_aside
from marin.execution.lease import is_lease_file
from marin.execution.states import StepState
from marin.execution.status import STATUS_FILE, StatusRecord, is_status_temp


def resumes(
    resumable: bool, forced: bool, force_run_failed: bool, key: str, status: StatusRecord | None
) -> bool:
    """Whether an attempt under `key` continues from the output of an earlier one with that key.

    Only a resumable step does, and only from an interrupted attempt (RUNNING, INTERRUPTED) or a
    failed one that `force_run_failed` retries; a step named in `force_run` always starts clean.
    """
    if not resumable or forced or status is None or status.key != key:
        return False
    return status.state in (StepState.RUNNING, StepState.INTERRUPTED) or (
        status.state == StepState.FAILED and force_run_failed
    )


def prepare_output(
    out: str, status: StatusRecord | None, keep_partial: bool, listing: list[str] | None = None
) -> None:
    """Empty the output directory of a previous attempt, keeping leases and the status history.

    A SUCCESS output (of another key, or forced: same-key ones were reused before this) is moved to
    a sibling copy named by `aside.aside_name` (`<output>.superseded-<key8>-<time>`) with a record
    saying why: a runner never deletes a finished output. With `keep_partial` (see `resumes`) an
    unfinished attempt's output stays for the step to resume from. `listing`: the folder's names,
    when the caller has just listed it.
    """
    if status is not None and status.state == StepState.SUCCESS:
        move_aside(
            out,
            AsideKind.SUPERSEDED,
            status.key,
            status.name,
            "a new key, or force_run, reuses this output path",
            keep=is_lease_file,
        )
        return
    if keep_partial:
        return
    for name in storage.list_names(out) if listing is None else listing:
        if not is_lease_file(name) and name != STATUS_FILE and not is_status_temp(name):
            storage.remove_tree(f"{out}/{name}")
