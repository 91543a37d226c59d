"""The plan: one walk over the DAG that says, for every step, what will happen and why.

States:
- `cached`: a SUCCESS output with the same key exists.
- `run: new`: no output of a step with this name was ever recorded under the prefix.
- `run: changed`: the most recent recorded output of a step with this name has another key; the plan
  lists each field that changed (a hash_attrs field, the version, the code fingerprint, a
  dependency's key), old -> new, and each declared input file changed, added or removed.
- `run: retry`: an attempt with this very key was killed, or failed and `force_run_failed` is set;
  or the output's `.executor_status` is unreadable (its contents are moved aside, see `aside_path`).
- `run: forced`: named in `force_run`, with a SUCCESS (moved aside) or an unfinished attempt of this
  key (cleared, even for a resumable step: this is how a resumable step gets a clean rerun).
- `waiting`: another runner holds the step's lease right now.
- `blocked`: it cannot run: it failed before (pass `force_run_failed=True`), a dependency is blocked, or
  its output folder holds files marin did not write (`conflict`; see `OutputConflictError`).

Plan-time errors (DagError): an output equal to the prefix, an output that would sit inside or contain
another declared or recorded output, and an output reached through a symlink inside the prefix.

Every step that runs also carries how many downstream steps will run after it.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

import storage
from marin.execution.aside import AsideKind, free_aside_path
from marin.execution.cache_key import FieldChange, code_fingerprint, diff_key_records, key_of, key_record
from marin.execution.dag import collect_dag, count_downstream_runs, reject_nested_outputs
from marin.execution.errors import DagError, OutputConflictError, UnreadableRecordError
from marin.execution.fingerprint import new_plan_memo
from marin.execution.inputs import InputScanner
from marin.execution.lease import LeaseInfo, current_holder
from marin.execution.outputs import Versions, folder_absent, latest_record, output_path_of
from marin.execution.ownership import check_no_symlinks, check_not_nested_in_records, foreign_entries
from marin.execution.states import RUN_STATES, PlanState, StepState
from marin.execution.status import STATUS_FILE, StatusRecord, read_status
from marin.execution.step_spec import StepSpec

PREFIX_ENV = "MARIN_PREFIX"
DEFAULT_PREFIX = "./marin-outputs"


def resolve_prefix(prefix: str | None = None) -> str:
    """The prefix outputs live under: the argument, else $MARIN_PREFIX, else ./marin-outputs."""
    chosen = prefix or os.environ.get(PREFIX_ENV) or DEFAULT_PREFIX
    return storage.absolute(chosen)


class PlannedStep(msgspec.Struct, gc=False):
    """One step of a plan: its key, where its output lives, its state and the reason for it.

    Built once per step by `build_plan` (not frozen: it is filled in as the plan settles; not tracked
    by the garbage collector, which a 50,000-step plan would otherwise make scan each one); treat it
    as read-only once built.
    """

    spec: StepSpec
    key: str
    record: Mapping[str, Any] | None  # what the key hashes; None for a cached step (never recorded again)
    output_path: str
    state: PlanState
    reason: str = ""
    changes: tuple[FieldChange, ...] = ()
    previous_path: str | None = None
    deps: tuple[int, ...] = ()
    downstream_runs: int = 0
    status: StatusRecord | None = None
    holder: LeaseInfo | None = None
    notes: tuple[str, ...] = ()  # whatever state: e.g. `unpinned: org/dataset` (an input the key cannot pin)
    aside_path: str | None = None  # where an unreadable status's output will be moved to
    conflict: str | None = None  # why the output folder is not this step's (an OutputConflictError message)
    folder_absent: bool = False  # the plan found no folder for it (so no lease or status to look for)

    @property
    def name(self) -> str:
        """The step's name."""
        return self.spec.name

    @property
    def will_run(self) -> bool:
        """Whether the runner will execute it (or wait for the runner that is)."""
        return self.state in RUN_STATES

    def to_json(self) -> dict[str, Any]:
        """The step as plain data."""
        return {
            "name": self.name,
            "key": self.key,
            "output_path": self.output_path,
            "state": self.state,
            "reason": self.reason,
            "changes": [{"field": c.field, "old": c.old, "new": c.new} for c in self.changes],
            "previous_path": self.previous_path,
            "downstream_runs": self.downstream_runs,
            "notes": list(self.notes),
            "aside_path": self.aside_path,
        }


class Plan(msgspec.Struct):
    """Every step of a DAG in topological order (dependencies first), with its state."""

    prefix: str
    steps: list[PlannedStep]
    index: dict[int, int] = msgspec.field(default_factory=dict)  # id(spec) -> position

    def of(self, spec: StepSpec | Any) -> PlannedStep:
        """The planned step for a spec (or a lazy handle) of this plan."""
        if not isinstance(spec, StepSpec):
            from marin.execution.lazy import lower

            spec = lower(spec)
        return self.steps[self.index[id(spec)]]

    def counts(self) -> dict[str, int]:
        """How many steps are in each state."""
        out: dict[str, int] = {}
        for s in self.steps:
            out[s.state.value] = out.get(s.state.value, 0) + 1
        return out

    def to_json(self) -> dict[str, Any]:
        """The plan as plain data."""
        return {"prefix": self.prefix, "counts": self.counts(), "steps": [s.to_json() for s in self.steps]}

    def summary(self) -> str:
        """One line: how many steps are in each state."""
        counts = ", ".join(f"{n} {state}" for state, n in sorted(self.counts().items()))
        return f"{len(self.steps)} steps under {self.prefix}: {counts}"


def build_plan(
    roots: Sequence[StepSpec],
    prefix: str,
    force_run: Iterable[str] = (),
    force_run_failed: bool = False,
    lease_timeout: float = 60.0,
) -> Plan:
    """Walk the DAG once: keys, output paths, existing statuses, and a state with its reason per step."""
    forced = set(force_run)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # the walk allocates only acyclic garbage; collector passes would double its cost
    try:
        return _build_plan(roots, prefix, forced, force_run_failed, lease_timeout)
    finally:
        if gc_was_enabled:
            gc.enable()


def _build_plan(roots, prefix, forced, force_run_failed, lease_timeout) -> Plan:
    CACHED, SUCCESS = PlanState.CACHED, StepState.SUCCESS  # noqa: N806 - locals: read per step
    specs = collect_dag(roots)
    memo = new_plan_memo()
    scanner = InputScanner(prefix)
    steps: list[PlannedStep] = []
    index: dict[int, int] = {}
    by_path: dict[str, int] = {}
    sibling_cache: dict[str, list[str]] = {}
    versions = Versions(sibling_cache)
    present: dict[str, frozenset[str]] = {}  # a folder -> the names in it (listed once, for new steps)
    remote = None if storage.is_local(prefix) else prefix
    for spec in specs:
        dep_idx = tuple(index[id(d)] for d in spec.deps)
        dep_steps = [steps[i] for i in dep_idx]
        if len(dep_steps) > 1 and len({d.spec.name for d in dep_steps}) < len(dep_steps):
            names = sorted(d.spec.name for d in dep_steps)
            raise DagError(
                f"step {spec.name!r} has two dependencies with one name ({names}); "
                "give them distinct names so the step can tell their outputs apart"
            )
        fingerprint = None if spec.version is not None else code_fingerprint(spec.fn, memo)
        inputs, notes = scanner.record(spec.name, spec.inputs) if spec.inputs else (None, ())
        record = key_record(
            spec.name,
            spec.hash_attrs,
            [(d.spec.name, d.key) for d in dep_steps],
            spec.version,
            fingerprint,
            inputs,
        )
        key = key_of(record)
        out = output_path_of(spec.name, spec.output_path, prefix, key)
        same = by_path.get(out)
        if same is not None:
            other = steps[same]
            if other.key != key:
                raise DagError(
                    f"steps {other.spec.name!r} and {spec.name!r} both claim the output path {out} with different "
                    f"keys ({other.key[:12]} vs {key[:12]}); give one of them another name or output_path"
                )
            index[id(spec)] = same  # the same work declared twice: one step
            continue
        if remote is not None:  # an object store: statuses are read below, many at once
            index[id(spec)] = len(steps)
            by_path[out] = len(steps)
            # The state is settled below, once the statuses are read.
            steps.append(
                PlannedStep(spec, key, record, out, PlanState.RUN_NEW, deps=dep_idx, notes=tuple(notes))
            )
            continue
        try:
            status, unreadable = read_status(out, strict=True), None
        except UnreadableRecordError as e:
            status, unreadable = None, e
        if status is not None and status.key == key and status.state == SUCCESS and spec.name not in forced:
            state, reason = CACHED, ""  # the common case, decided inline (as `_state_of` would)
        else:
            state, reason = _state_of(spec, key, status, dep_steps, forced, force_run_failed, out)
        # A cached step needs neither its key record nor its status again; dropping them frees those
        # dicts at once, so a large cached plan leaves few objects for the garbage collector to scan.
        if state is CACHED:
            planned = PlannedStep(spec, key, None, out, state, reason, deps=dep_idx)
        else:
            planned = PlannedStep(spec, key, record, out, state, reason, deps=dep_idx, status=status)
        if notes:
            planned.notes = tuple(notes)
        if state in RUN_STATES:
            if status is None and unreadable is None:
                # No status: one listing of the folder above (shared by every new step in it) says
                # whether the output folder is there; when it is not, there is nothing in it to check.
                planned.folder_absent = folder_absent(out, sibling_cache, present)
            if not (planned.folder_absent and storage.parent(out) == prefix):
                check_no_symlinks(spec.name, prefix, out)
                check_not_nested_in_records(spec.name, prefix, out)
            _explain_run(planned, prefix, versions, lease_timeout, unreadable)
        index[id(spec)] = len(steps)
        by_path[out] = len(steps)
        steps.append(planned)
    if remote is not None:
        _settle_remote(steps, prefix, forced, force_run_failed, lease_timeout, sibling_cache, versions)
    scanner.save()
    reject_nested_outputs(steps, prefix)
    count_downstream_runs(steps)
    return Plan(prefix, steps, index)


def _settle_remote(
    steps: list[PlannedStep],
    prefix: str,
    forced,
    force_run_failed,
    lease_timeout,
    sibling_cache: dict[str, list[str]],
    versions: Versions,
) -> None:
    """The states of a plan under an object-store prefix, with its round trips overlapped.

    Each folder holding outputs is listed once; a step whose folder is not there has no status (nor
    lease, nor foreign files) and costs no call (`folder_absent`). The statuses of the others are
    read many at once (`storage.overlapped`). Local disk keeps the serial walk: there a read costs
    microseconds and threads would only add to it.
    """
    dirs = sorted({storage.parent(s.output_path) for s in steps} - set(sibling_cache))
    sibling_cache.update(zip(dirs, storage.overlapped(storage.list_names, dirs), strict=False))
    present = {f"{d}/{n}" for d in dirs for n in sibling_cache[d]}
    for s in steps:
        s.folder_absent = s.output_path not in present
    to_read = [s.output_path for s in steps if not s.folder_absent]
    read = dict(zip(to_read, storage.overlapped(_read_status_or_error, to_read), strict=False))
    for planned in steps:
        status, unreadable = read.get(planned.output_path, (None, None))
        dep_steps = [steps[i] for i in planned.deps]
        spec = planned.spec
        planned.state, planned.reason = _state_of(
            spec, planned.key, status, dep_steps, forced, force_run_failed, planned.output_path
        )
        if planned.state == PlanState.CACHED:
            planned.record = None
            continue
        planned.status = status
        if planned.state in RUN_STATES:
            if not planned.folder_absent or storage.parent(planned.output_path) != prefix:
                check_not_nested_in_records(spec.name, prefix, planned.output_path)
            _explain_run(planned, prefix, versions, lease_timeout, unreadable)


def _read_status_or_error(path: str) -> tuple[StatusRecord | None, UnreadableRecordError | None]:
    try:
        return read_status(path, strict=True), None
    except UnreadableRecordError as e:
        return None, e


def _state_of(spec, key, status, dep_steps, forced, force_run_failed, output_path) -> tuple[PlanState, str]:
    same_key = status is not None and status.key == key
    if same_key and status.state == StepState.SUCCESS and spec.name not in forced:
        return PlanState.CACHED, ""
    blocked = [d.spec.name for d in dep_steps if d.state == PlanState.BLOCKED]
    if blocked:
        return PlanState.BLOCKED, f"dependency {blocked[0]!r} is blocked"
    if same_key:
        state = status.state
        if spec.name in forced:
            if state == StepState.SUCCESS:
                return PlanState.RUN_FORCED, "named in force_run"
            return (
                PlanState.RUN_FORCED,
                f"named in force_run: starts clean, clearing the {state} attempt's output",
            )
        if state == StepState.FAILED and not force_run_failed:
            return (
                PlanState.BLOCKED,
                "failed in an earlier run; pass force_run_failed=True (or --force-run-failed) to retry",
            )
        reason = (
            "an earlier attempt was interrupted (killed, or its runner stalled)"
            if state == StepState.RUNNING
            else f"previous attempt ended {state}"
        )
        return PlanState.RUN_RETRY, reason + _resumes(spec, output_path)
    return PlanState.RUN_NEW, ""


def _resumes(spec: StepSpec, output_path: str) -> str:
    """What a rerun of an unfinished attempt starts from: the step's own word (`resume_note`) or,
    for a resumable step without one, that it keeps the attempt's output."""
    if not spec.resumable:
        return ""
    if spec.resume_note is None:
        return "; resumable: it resumes from that attempt's output"
    return f"; {spec.resume_note(output_path)}"


def _explain_run(
    step: PlannedStep,
    prefix: str,
    versions: Versions,
    lease_timeout: float,
    unreadable: UnreadableRecordError | None = None,
):
    """Fill in why a step runs: a diff against its latest recorded output, and any live lease; or
    that its output folder is not its own (blocked, with `conflict`)."""
    state, reason, changes, previous = step.state, step.reason, (), None
    if unreadable is not None:
        step.aside_path = free_aside_path(step.output_path, AsideKind.UNREADABLE, "")[0]
        state, reason = (
            PlanState.RUN_RETRY,
            (
                f"unreadable status ({unreadable.why}): the folder's contents will be moved "
                f"aside to {step.aside_path}, never deleted"
            ),
        )
    elif state == PlanState.RUN_NEW:
        own = step.status is not None and step.status.name == step.name
        other = step.status.name if step.status is not None and not own else None
        foreign = [] if own or step.folder_absent else foreign_entries(step.output_path)
        if STATUS_FILE in foreign:  # another runner wrote the status after ours was read: read it again
            try:
                step.status = read_status(step.output_path, strict=True)
            except UnreadableRecordError:
                step.status = None
            own = step.status is not None and step.status.name == step.name
            other = step.status.name if step.status is not None and not own else None
            foreign = [] if own else foreign
        if foreign and (other is not None or not step.spec.adopt):
            detail = f" (the output of step {other!r})" if other is not None else f" ({len(foreign)} entries)"
            step.conflict = f"OutputConflictError: {OutputConflictError(step.name, step.output_path, detail)}"
            state, reason = PlanState.BLOCKED, step.conflict
        elif foreign:
            reason = (
                f"adopt: the existing folder ({len(foreign)} entries) becomes its output; fn does not run"
            )
        elif step.status is None and not step.folder_absent and storage.exists(step.output_path):
            state, reason = PlanState.RUN_RETRY, "an earlier attempt left partial output (killed?)"
        else:
            if step.status is None:
                step.folder_absent = True  # no status and no folder: no lease to look for either
            previous, old_record = latest_record(step.spec, step.output_path, prefix, versions)
            if old_record is not None:
                state, changes = PlanState.RUN_CHANGED, tuple(diff_key_records(old_record, step.record))
                reason = f"differs from {previous}"
    holder = (
        current_holder(step.output_path, lease_timeout)
        if state != PlanState.BLOCKED and not step.folder_absent
        else None
    )
    if holder is not None:
        state, reason = PlanState.WAITING, f"lease held by {holder.describe()}"
    step.state, step.reason, step.changes, step.previous_path, step.holder = (
        state,
        reason,
        changes,
        previous,
        holder,
    )
