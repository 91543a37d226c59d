"""The `.executor_info` of one step's run: its key record and provenance, with what is the same for
every step of a run (the experiment file, the command line, git state per module) computed once."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from marin.execution.artifact import DepRecord, ExecutorInfo, fn_reference, resources_json
from marin.execution.plan import PlannedStep
from marin.execution.run_provenance import environment, git_state, run_provenance

_PROVENANCE = "provenance"


def step_info(
    step: PlannedStep,
    deps: Sequence[PlannedStep],
    prefix: str,
    memo: dict[Any, Any],
    started: float,
    ended: float,
    **extra: Any,
) -> ExecutorInfo:
    """The info record of `step`, run from `started` to `ended`; `memo` is shared by the run's steps.
    `extra` sets further fields (an adopted folder's `adopted` and `manifest`)."""
    spec = step.spec
    if _PROVENANCE not in memo:  # the same for every step of the run: computed once
        memo[_PROVENANCE] = run_provenance()
    fn = spec.fn.func if isinstance(spec.fn, functools.partial) else spec.fn
    module = getattr(fn, "__module__", None)
    git = memo.get(("git", module))
    if git is None:
        git = memo[("git", module)] = git_state(spec.fn)
    provenance = memo[_PROVENANCE]
    return ExecutorInfo(
        name=spec.name,
        key=step.key,
        key_record=step.record,
        hash_attrs=spec.hash_attrs,
        version=spec.version,
        code_fingerprint=step.record["code"].get("fingerprint"),
        deps=tuple(DepRecord(d.name, d.key, d.output_path) for d in deps),
        fn=fn_reference(spec.fn),
        git=git,
        environment=environment(),
        output_path=step.output_path,
        prefix=prefix,
        start_time=started,
        end_time=ended,
        duration_s=round(ended - started, 6),
        resources=resources_json(spec.resources),
        experiment=provenance["experiment"],
        command_line=provenance["command_line"],
        **extra,
    )
