"""The plan: one walk over the DAG that says, for every step, what will happen and why.

States:
- `cached`: a SUCCESS output with the same key exists.
- `run: new`: no output of a step with this name was ever recorded under the prefix.
- `run: changed`: the most recent recorded output of a step with this name has another key; the plan
  lists each field that changed (a hash_attrs field, the version, the code fingerprint, a
  dependency's key), old -> new, and each declared input file changed, added or removed.
- `run: retry`: an attempt with this very key was interrupted or lost (its process killed, its
  runner dead), fewer than `max_attempts` times lost; or it failed and `force_run_failed` is set;
  or the output's `.executor_status` is unreadable (its contents are moved aside, see `aside_path`).
- `run: forced`: named in `force_run`, with a SUCCESS (moved aside) or an unfinished attempt of this
  key (cleared, even for a resumable step: this is how a resumable step gets a clean rerun).
- `waiting`: another runner holds the step's lease right now.
- `blocked`: it cannot run: it failed before (its code raised) or was lost `max_attempts` times (pass
  `force_run_failed=True`), a dependency is blocked, or its output folder holds files marin did not
  write (`conflict`; see `OutputConflictError`).

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
from marin.execution.outputs import Versions, latest_record, output_path_of
from marin.execution.ownership import check_no_symlinks, check_not_nested_in_records, foreign_entries
from marin.execution.states import RUN_STATES, PlanState, StepState
from marin.execution.status import DEFAULT_MAX_ATTEMPTS, STATUS_FILE, StatusRecord, lost_attempts, read_status
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
    *,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> Plan:
    """Walk the DAG once: keys, output paths, existing statuses, and a state with its reason per step.

    The steps are planned in topological order, in batches of `_BATCH`: each batch's keys and paths,
    then its storage reads (the folders holding its outputs, each listed once per plan, and the
    statuses of the outputs found there, through `storage.overlapped`: one after another on local
    disk, many at once on an object store), then its states, which need only their dependencies'.
    A step whose folder is not there has no status, lease or foreign files, and costs no read.
    """
    planner = _Planner(prefix, set(force_run), force_run_failed, lease_timeout, max_attempts)
    gc_was_enabled = gc.isenabled()
    # The walk and the counts after it allocate only acyclic garbage; collector passes over the
    # declared DAG meanwhile would add a third to a 100,000-step plan.
    gc.disable()
    try:
        specs = collect_dag(roots)
        for start in range(0, len(specs), _BATCH):
            planner.plan_batch(specs[start : start + _BATCH])
        planner.scanner.save()
        reject_nested_outputs(planner.steps, prefix)
        count_downstream_runs(planner.steps)
    finally:
        if gc_was_enabled:
            gc.enable()
    return Plan(prefix, planner.steps, planner.index)


_BATCH = 512  # steps planned together: their storage reads overlap; their key records live until settled


class _Planner:
    """The state of one `build_plan` walk: the steps planned so far and what storage showed."""

    def __init__(
        self, prefix: str, forced: set[str], force_run_failed: bool, lease_timeout: float, max_attempts: int
    ):
        self.prefix = prefix
        self.forced = forced
        self.force_run_failed = force_run_failed
        self.lease_timeout = lease_timeout
        self.max_attempts = max_attempts
        self.memo = new_plan_memo()
        self.scanner = InputScanner(prefix)
        self.steps: list[PlannedStep] = []
        self.index: dict[int, int] = {}  # id(spec) -> position
        self.by_path: dict[str, int] = {}
        self.listings: dict[str, list[str]] = {}  # a folder -> its names, listed once
        self.present: dict[str, frozenset[str]] = {}  # the same, as sets
        self.versions = Versions(self.listings)

    def plan_batch(self, specs: Sequence[StepSpec]) -> None:
        """Plan the next steps of the topological order (see `build_plan`)."""
        new = [planned for spec in specs if (planned := self._declare(spec)) is not None]
        where = [p.output_path.rpartition("/") for p in new]  # (folder, "/", name)
        present = self.present
        dirs = sorted({folder for folder, _, _ in where} - present.keys())
        for folder, names in zip(
            dirs, storage.overlapped(storage.list_names, dirs, where=self.prefix), strict=True
        ):
            self.listings[folder] = names
            present[folder] = frozenset(names)
        there = []
        for p, (folder, _, name) in zip(new, where, strict=True):
            if name in present[folder]:
                there.append(p)
            else:
                p.folder_absent = True
        read = storage.overlapped(_read_status_or_error, [p.output_path for p in there], where=self.prefix)
        found = {id(p): status_or_error for p, status_or_error in zip(there, read, strict=True)}
        for p in new:
            self._settle(p, *found.get(id(p), _NO_STATUS))

    def _declare(self, spec: StepSpec) -> PlannedStep | None:
        """The step's key and output path (None: the same work as a step declared before)."""
        steps, index = self.steps, self.index
        dep_idx = tuple([index[id(d)] for d in spec.deps])
        dep_steps = [steps[i] for i in dep_idx]
        if len(dep_steps) > 1 and len({d.spec.name for d in dep_steps}) < len(dep_steps):
            names = sorted(d.spec.name for d in dep_steps)
            raise DagError(
                f"step {spec.name!r} has two dependencies with one name ({names}); "
                "give them distinct names so the step can tell their outputs apart"
            )
        fingerprint = None if spec.version is not None else code_fingerprint(spec.fn, self.memo)
        inputs, notes = self.scanner.record(spec.name, spec.inputs) if spec.inputs else (None, ())
        record = key_record(
            spec.name,
            spec.hash_attrs,
            [(d.spec.name, d.key) for d in dep_steps],
            spec.version,
            fingerprint,
            inputs,
        )
        key = key_of(record)
        out = output_path_of(spec.name, spec.output_path, self.prefix, key)
        same = self.by_path.get(out)
        if same is not None:
            if steps[same].key != key:
                raise DagError(
                    f"steps {steps[same].spec.name!r} and {spec.name!r} both claim the output path {out} with "
                    f"different keys ({steps[same].key[:12]} vs {key[:12]}); give one of them another name or "
                    "output_path"
                )
            self.index[id(spec)] = same  # the same work declared twice: one step
            return None
        planned = PlannedStep(spec, key, record, out, PlanState.RUN_NEW, deps=dep_idx, notes=tuple(notes))
        self.index[id(spec)] = self.by_path[out] = len(steps)
        steps.append(planned)
        return planned

    def _settle(
        self, planned: PlannedStep, status: StatusRecord | None, unreadable: UnreadableRecordError | None
    ) -> None:
        """Decide the step's state from its status (read just before) and its dependencies' states."""
        planned.state, planned.reason = self._state_of(planned, status)
        if planned.state is PlanState.CACHED:
            # A cached step needs neither its key record nor its status again: dropping them frees
            # those dicts at once, so a large cached plan holds few objects.
            planned.record = None
            return
        planned.status = status
        if planned.state in RUN_STATES:
            if not (planned.folder_absent and storage.parent(planned.output_path) == self.prefix):
                check_no_symlinks(planned.name, self.prefix, planned.output_path)
                check_not_nested_in_records(planned.name, self.prefix, planned.output_path)
            _explain_run(planned, self.prefix, self.versions, self.lease_timeout, unreadable)

    def _state_of(self, planned: PlannedStep, status: StatusRecord | None) -> tuple[PlanState, str]:
        name, key = planned.name, planned.key
        same_key = status is not None and status.key == key
        if same_key and status.state == StepState.SUCCESS and name not in self.forced:
            return PlanState.CACHED, ""
        blocked = [self.steps[d].name for d in planned.deps if self.steps[d].state == PlanState.BLOCKED]
        if blocked:
            return PlanState.BLOCKED, f"dependency {blocked[0]!r} is blocked"
        if not same_key:
            return PlanState.RUN_NEW, ""
        state = status.state
        if name in self.forced:
            if state == StepState.SUCCESS:
                return PlanState.RUN_FORCED, "named in force_run"
            return (
                PlanState.RUN_FORCED,
                f"named in force_run: starts clean, clearing the {state} attempt's output",
            )
        if state == StepState.FAILED and not self.force_run_failed:
            return (
                PlanState.BLOCKED,
                "failed in an earlier run; pass force_run_failed=True (or --force-run-failed) to retry",
            )
        return self._retry(planned, status)

    def _retry(self, planned: PlannedStep, status: StatusRecord) -> tuple[PlanState, str]:
        """The state of a step whose attempt under this key ended without succeeding (or is running)."""
        state, resumes = status.state, _resumes(planned.spec, planned.output_path)
        lost = lost_attempts(status, planned.key)
        if state == StepState.RUNNING:
            if current_holder(planned.output_path, self.lease_timeout) is not None:
                return PlanState.RUN_RETRY, "an attempt is running"  # `_explain_run` names the holder
            lost += 1  # its runner died (killed, or stalled past the lease timeout)
            reason = "an earlier attempt was interrupted (killed, or its runner stalled)"
        elif state == StepState.LOST:
            reason = f"its process was lost ({_first_line(status)})"
        else:
            reason = f"previous attempt ended {state}"
        if lost >= self.max_attempts and not self.force_run_failed:
            return (
                PlanState.BLOCKED,
                f"{reason}; lost in {lost} attempts (max_attempts={self.max_attempts}): pass force_run_failed=True "
                "(or --force-run-failed) to retry",
            )
        if lost:
            reason += f"; retried automatically (attempt {lost + 1}, at most {self.max_attempts} lost)"
        return PlanState.RUN_RETRY, reason + resumes


def _resumes(spec: StepSpec, output_path: str) -> str:
    """What a rerun of an unfinished attempt starts from: the step's own word (`resume_note`) or,
    for a resumable step without one, that it keeps the attempt's output."""
    if not spec.resumable:
        return ""
    if spec.resume_note is None:
        return "; resumable: it resumes from that attempt's output"
    return f"; {spec.resume_note(output_path)}"


def _first_line(status: StatusRecord) -> str:
    error = status.events[-1].error if status.events else None
    lines = (error or "").strip().splitlines()
    return lines[0][:160] if lines else "no reason recorded"


_NO_STATUS = (None, None)


def _read_status_or_error(path: str) -> tuple[StatusRecord | None, UnreadableRecordError | None]:
    try:
        return read_status(path, strict=True), None
    except UnreadableRecordError as e:
        return None, e


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
        state, reason, changes, previous = _explain_new(step, prefix, versions)
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


def _explain_new(
    step: PlannedStep, prefix: str, versions: Versions
) -> tuple[PlanState, str, tuple[FieldChange, ...], str | None]:
    """A step with no status of this key: a folder that is not its own (blocked, or adopted), an
    earlier attempt's partial output, or a new or changed step (diffed against its latest record)."""
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
        return PlanState.BLOCKED, step.conflict, (), None
    if foreign:
        return (
            PlanState.RUN_NEW,
            f"adopt: the existing folder ({len(foreign)} entries) becomes its output; fn does not run",
            (),
            None,
        )
    if step.status is None and not step.folder_absent and storage.exists(step.output_path):
        return PlanState.RUN_RETRY, "an earlier attempt left partial output (killed?)", (), None
    if step.status is None:
        step.folder_absent = True  # no status and no folder: no lease to look for either
    previous, old_record = latest_record(step.spec, step.output_path, prefix, versions)
    if old_record is not None:
        return (
            PlanState.RUN_CHANGED,
            f"differs from {previous}",
            tuple(diff_key_records(old_record, step.record)),
            previous,
        )
    return PlanState.RUN_NEW, "", (), None
