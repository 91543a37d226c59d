"""One step's life under its lease: acquire, inspect, prepare the output, run the task, record.

The order is what makes a crash safe:
1. take the lease (or wait for the runner holding it, then reuse what it made);
2. `inspect()`: re-read the status under the lease. A SUCCESS with this key is reused, never redone;
   an unreadable status has the folder's contents moved aside (never deleted), and the log says
   where; a non-empty folder with no status of this step is not ours: `OutputConflictError` (or,
   with `adopt=True`, it becomes the step's SUCCESS output without running `fn`); an attempt of
   this key that failed (its code raised) is blocked unless `force_run_failed`, and so is one whose
   process was lost `max_attempts` times;
3. `prepare()`: clear what a failed or lost attempt left, unless the step is resumable, that attempt
   had its key, and it is resumed (not named in `force_run`; a failed one only under
   `force_run_failed`); a SUCCESS output (another key, or forced) is moved aside, never deleted.
   Then write RUNNING (with the attempt's number);
4. `run_task()`: run the task on the cluster while the runner's heartbeat renews the lease (a lost
   lease cancels the task: the cluster kills its process where it can);
5. `record()`: for a task that returned, check the lease is still ours, write `.executor_info` and
   `.artifact.json`, then SUCCESS last. A task whose own code raised is recorded FAILED; one whose
   process was lost (killed from outside, its node gone: `TaskLostError`; or its lease given up
   because storage kept failing: `LeaseGivenUpError`) is recorded LOST, and the next run retries it.
A runner stopped by SIGINT/SIGTERM (`Interrupt`) cancels its running tasks through the cluster and
records them INTERRUPTED, never SUCCESS. A runner that loses the lease to a takeover writes nothing
more: it waits for the new holder and reuses its output.
"""

from __future__ import annotations

import functools
import logging
import textwrap
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import msgspec

import storage
from fray.cluster import Cluster, TaskLostError
from fray.cluster.logs import tail
from marin.execution.artifact import LOG_FILE, manifest, write_records
from marin.execution.aside import AsideKind, move_aside
from marin.execution.context import StepContext
from marin.execution.errors import (
    LeaseLostError,
    OutputConflictError,
    UnreadableRecordError,
    error_line,
    is_reported,
)
from marin.execution.heartbeat import Heartbeat
from marin.execution.interrupt import Interrupt
from marin.execution.lease import Lease, LeaseInfo, is_lease_file, try_acquire
from marin.execution.ownership import check_no_symlinks, foreign_entries
from marin.execution.plan import PlannedStep
from marin.execution.run_provenance import step_info
from marin.execution.states import RunOutcome, StepState
from marin.execution.status import (
    DEFAULT_MAX_ATTEMPTS,
    STATUS_FILE,
    Event,
    StatusRecord,
    event,
    is_status_temp,
    lost_attempts,
    read_status,
    write_status,
)
from marin.execution.task import StepTask

logger = logging.getLogger("marin.execution")


class Outcome(msgspec.Struct, frozen=True):
    """How a step ended in this run: succeeded (ran here), reused (another runner made it), failed,
    lost or interrupted."""

    kind: RunOutcome
    result: Any = None
    error: str = ""  # a failure's formatted error: its first line is the error itself (`error_line`)
    seconds: float | None = None
    reported: bool = False  # a failure raised on purpose with a message for the user (`is_reported`)


class ExecutionSettings(msgspec.Struct, frozen=True, kw_only=True):
    """What every step of one run shares."""

    prefix: str
    cluster: Cluster
    heartbeat: Heartbeat
    lease_timeout: float
    forced: frozenset[str]
    force_run_failed: bool
    run_started: float
    on_wait: Callable[[str, LeaseInfo], None]
    interrupt: Interrupt
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    # How many steps' functions run at once, when the runner drives more steps than that (an object
    # store: the lease and record round trips of other steps overlap the running ones).
    slots: threading.Semaphore | None = None
    # What `.executor_info` records that is the same for every step of the run (git state by module).
    memo: dict[Any, Any] = msgspec.field(default_factory=dict)


class Verdict(StrEnum):
    """What `inspect` decided."""

    END = "end"  # nothing to run: reused, or blocked (an earlier failure, a folder not ours)
    ADOPT = "adopt"  # take the folder as the step's output without running `fn`
    RUN = "run"


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    """What `inspect` found under the lease."""

    verdict: Verdict
    outcome: Outcome | None = None  # END: how the step ends
    foreign: tuple[str, ...] = ()  # ADOPT: the folder's entries
    status: StatusRecord | None = None  # RUN: the status read under the lease
    listing: list[str] | None = None  # RUN: the folder's names, when just listed
    moved_to: str | None = None  # RUN: where an unreadable status's folder was moved


@dataclass
class Attempt:
    """One attempt at running a step, from `prepare` to `record`."""

    events: list[Event]
    started: float
    log_path: str
    resumed: bool
    dep_paths: dict[str, str]  # each dependency's output path, by name (the step's context)
    checked: bool = False  # the records were written under a lease just checked to be ours


class Ending(StrEnum):
    """How `run_task` ended."""

    RETURNED = "returned"
    RAISED = "raised"  # the step's own code raised
    LOST = "lost"  # its process or lease was lost
    INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class TaskEnd:
    """What `run_task` came to: the task's value, or the error that ended it."""

    ending: Ending
    result: Any = None
    error: BaseException | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def execute_step(step: PlannedStep, deps: Sequence[PlannedStep], settings: ExecutionSettings) -> Outcome:
    """Run `step` (whose dependencies are `deps`) to an Outcome; never raises (an unexpected error
    of the runner's own machinery, storage or pickling, is a failed Outcome)."""
    if step.conflict:
        return Outcome(RunOutcome.FAILED, error=step.conflict)
    try:
        check_no_symlinks(step.name, settings.prefix, step.output_path)  # again: the plan may be old
        while True:
            lease_or_outcome = _acquire(step, settings)
            if isinstance(lease_or_outcome, Outcome):
                return lease_or_outcome
            try:
                return _under_lease(step, lease_or_outcome, deps, settings)
            except LeaseLostError:
                continue  # another runner took the step over: wait for it and reuse its output
    except Exception as e:  # the runner's own machinery failed (storage, pickling): report, don't hang
        return Outcome(RunOutcome.FAILED, error=_format_error(e, step), reported=is_reported(e))


def _under_lease(
    step: PlannedStep, lease: Lease, deps: Sequence[PlannedStep], settings: ExecutionSettings
) -> Outcome:
    """Phases 2 to 5 under the lease, which is released at the end whatever happened."""
    attempt = None
    try:
        decision = inspect(step, lease, settings)
        if decision.verdict == Verdict.END:
            return decision.outcome
        if decision.verdict == Verdict.ADOPT:
            return _adopt(step, lease, deps, settings, decision.foreign)
        attempt = prepare(step, decision, deps, settings)
        ended = run_task(step, lease, attempt, settings)
        return record(step, lease, attempt, ended, deps, settings)
    finally:
        settings.heartbeat.discard(lease)
        try:
            lease.release(just_checked=attempt is not None and attempt.checked)
        except Exception:
            if lease.given_up is None:
                raise
            # The storage that failed the heartbeat fails this too: the file goes stale instead.
            logger.warning("could not release the given-up lease on %s", step.output_path, exc_info=True)


# 1. The lease.


def _acquire(step: PlannedStep, settings: ExecutionSettings) -> Lease | Outcome:
    """Take the step's lease, waiting while a live runner holds it; an Outcome if that runner finished it."""
    out = step.output_path
    if storage.is_local(out):
        storage.makedirs(out)  # elsewhere `try_acquire` makes the folder only if the store needs one
    delay, waited = 0.01, False
    assume_free = step.folder_absent  # the plan listed no folder: try generation 0 without listing first
    while True:
        got = try_acquire(out, step.name, settings.lease_timeout, assume_free)
        assume_free = False
        if isinstance(got, Lease):
            settings.heartbeat.add(got)
            return got
        finished = _finished_elsewhere(step, settings)
        if finished is not None:
            return finished
        if got is None:
            continue  # lost a race for a free lease just now: look again at once
        if settings.interrupt.is_set:
            return Outcome(RunOutcome.INTERRUPTED, error=settings.interrupt.reason or "")
        if not waited:
            settings.on_wait(step.name, got)
            waited = True
        # Another process holds the lease; nothing notifies across processes, so look again soon.
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)


def _finished_elsewhere(
    step: PlannedStep, settings: ExecutionSettings, status: StatusRecord | None = None
) -> Outcome | None:
    """The outcome another runner reached for this very key: a SUCCESS to reuse, or a fresh failure
    of the step's code (a fresh loss is retried: see `_blocked`)."""
    status = status if status is not None else read_status(step.output_path)
    if status is None or status.key != step.key or not status.events:
        return None
    last = status.events[-1]
    fresh = last.time >= settings.run_started
    if status.state == StepState.SUCCESS and (fresh or step.name not in settings.forced):
        return Outcome(RunOutcome.REUSED)
    if status.state == StepState.FAILED and fresh:
        return Outcome(
            RunOutcome.FAILED,
            error=f"failed in another runner ({last.host}:{last.pid}):\n{last.error or ''}",
        )
    return None


# 2. Inspect.


def inspect(step: PlannedStep, lease: Lease, settings: ExecutionSettings) -> Decision:
    """Re-read the status under the lease and decide: reuse, block, adopt or run (see the docstring)."""
    out = step.output_path
    listing, moved_to = lease.listing, None  # taken with the lease: is there a status, what else?
    try:
        status = None if listing is not None and STATUS_FILE not in listing else read_status(out, strict=True)
    except UnreadableRecordError as e:
        listing, status = None, None  # the folder changed: list it again
        why = f"unreadable status: {e.why}"
        moved_to = move_aside(
            out, AsideKind.UNREADABLE, "", step.name, why, keep=is_lease_file, target=step.aside_path
        )
        logger.warning("step %r: %s; the folder's contents were moved aside to %s", step.name, e, moved_to)
    if status is None or status.name != step.name:
        foreign = (
            foreign_entries(out)
            if listing is None
            else sorted(n for n in listing if not is_lease_file(n) and not is_status_temp(n))
        )
        if foreign and (status is not None or not step.spec.adopt):
            other = f" (the output of step {status.name!r})" if status is not None else ""
            error = f"OutputConflictError: {OutputConflictError(step.name, out, other)}"
            return Decision(verdict=Verdict.END, outcome=Outcome(RunOutcome.FAILED, error=error))
        if foreign:
            return Decision(verdict=Verdict.ADOPT, foreign=tuple(foreign))
    if status is not None and status.key == step.key:
        ended = _finished_elsewhere(step, settings, status) or _blocked(step, status, settings)
        if ended is not None:
            return Decision(verdict=Verdict.END, outcome=ended)
    return Decision(verdict=Verdict.RUN, status=status, listing=listing, moved_to=moved_to)


def _blocked(step: PlannedStep, status: StatusRecord, settings: ExecutionSettings) -> Outcome | None:
    """Why an earlier attempt of this key keeps the step from running, unless retrying is asked for:
    its code raised (FAILED), or its process was lost `max_attempts` times."""
    if settings.force_run_failed or step.name in settings.forced:
        return None
    if status.state == StepState.FAILED:
        return Outcome(
            RunOutcome.FAILED,
            error=f"failed in an earlier run; see {step.output_path}/{LOG_FILE}; pass force_run_failed=True "
            "(or --force-run-failed) to retry",
        )
    lost = lost_attempts(status, step.key) + (status.state == StepState.RUNNING)  # we hold its lease now
    if lost >= settings.max_attempts:
        return Outcome(
            RunOutcome.FAILED,
            error=f"its process was lost in {lost} attempts (the last: {_last_error(status)}); not retried "
            f"again automatically (max_attempts={settings.max_attempts}); see {step.output_path}/{LOG_FILE}; "
            "pass force_run_failed=True (or --force-run-failed) to retry",
        )
    return None


def _last_error(status: StatusRecord) -> str:
    ended = next((e for e in reversed(status.events) if e.error), None)
    first = (ended.error or "").strip().splitlines()[:1] if ended else []
    return first[0][:200] if first else "its runner died"


# 3. Prepare.


def prepare(
    step: PlannedStep, decision: Decision, deps: Sequence[PlannedStep], settings: ExecutionSettings
) -> Attempt:
    """Clear, keep or move aside what an earlier attempt left, then write RUNNING."""
    out, status = step.output_path, decision.status
    resumed = resumes(
        step.spec.resumable, step.name in settings.forced, settings.force_run_failed, step.key, status
    )
    prepare_output(out, status, resumed, decision.listing)
    events: list[Event] = list(status.events) if status is not None else []
    lost = 0
    if status is not None and status.key == step.key:  # a RUNNING one is dead: we hold its lease now
        lost = lost_attempts(status, step.key) + (status.state == StepState.RUNNING)
    # The deps' paths let `marin gc` keep what an unfinished output depends on (it has no .executor_info).
    events.append(
        event(StepState.RUNNING, key=step.key, deps=tuple(d.output_path for d in deps), attempt=lost + 1)
    )
    # On disk from now on: a killed attempt reads as interrupted (a retry), not as its previous state.
    write_status(out, step.name, step.key, events)
    log_path = f"{out}/{LOG_FILE}"
    if decision.moved_to is not None:
        storage.append_bytes(
            log_path,
            f"[marin] the unreadable .executor_status of {out} and the folder's "
            f"contents were moved aside to {decision.moved_to}\n".encode(),
        )
    return Attempt(events, time.time(), log_path, resumed, {d.name: d.output_path for d in deps})


def resumes(
    resumable: bool, forced: bool, force_run_failed: bool, key: str, status: StatusRecord | None
) -> bool:
    """Whether an attempt under `key` continues from the output of an earlier one with that key.

    Only a resumable step does, and only from an interrupted or lost attempt (RUNNING, INTERRUPTED,
    LOST) or a failed one that `force_run_failed` retries; a step named in `force_run` always starts
    clean.
    """
    if not resumable or forced or status is None or status.key != key:
        return False
    return status.state in (StepState.RUNNING, StepState.INTERRUPTED, StepState.LOST) or (
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


# 4. Run the task.


def run_task(step: PlannedStep, lease: Lease, attempt: Attempt, settings: ExecutionSettings) -> TaskEnd:
    """Run the step's function on the cluster; say how it ended. A lease taken over meanwhile raises
    LeaseLostError: the new holder owns the records."""
    interrupt, slot, future = settings.interrupt, settings.slots, None
    context = StepContext(step.name, step.output_path, settings.prefix, attempt.dep_paths)
    if slot is not None:
        slot.acquire()
    try:
        # Inside the try: a submit that raises (pickling, an unreachable cluster) is the step's failure.
        future = settings.cluster.submit(
            StepTask(step.spec.fn, context, settings.memo),
            name=step.name,
            resources=step.spec.resources,
            log_path=attempt.log_path,
            on_preemption=functools.partial(_record_preemption, step, attempt, lease),
        )
        interrupt.register(future, step.name)
        stop = functools.partial(_stop, settings.cluster, future, lease)
        lease.on_lost.append(stop)
        if lease.lost:  # lost before the callback was in place
            stop()
        result = future.result()
    except BaseException as e:  # the step's own failure, whatever it raised; or its process's loss
        return _ending_of(step, lease, interrupt, e)
    finally:
        if slot is not None:
            slot.release()
        if future is not None:
            interrupt.unregister(future)
    if interrupt.is_set and lease.still_held():  # never SUCCESS once told to stop
        return TaskEnd(Ending.INTERRUPTED)
    if lease.given_up is not None:  # ended on its own just as its lease was given up
        return TaskEnd(Ending.LOST, error=lease.given_up)
    return TaskEnd(Ending.RETURNED, result=result)


def _ending_of(step: PlannedStep, lease: Lease, interrupt: Interrupt, error: BaseException) -> TaskEnd:
    """Who ended a task that raised `error`: the runner's interrupt (a terminal's Ctrl-C also reaches
    the step's process, maybe first), a takeover (raises), a lost process or lease, or its own code."""
    if (interrupt.is_set or isinstance(error, KeyboardInterrupt)) and lease.still_held():
        return TaskEnd(Ending.INTERRUPTED)
    if lease.given_up is None and not lease.still_held():
        raise LeaseLostError(
            f"step {step.name!r} lost its lease on {step.output_path}; another runner took it over"
        ) from error
    if lease.given_up is not None:  # its own error is only the cancellation
        return TaskEnd(Ending.LOST, error=lease.given_up)
    return TaskEnd(Ending.LOST if isinstance(error, TaskLostError) else Ending.RAISED, error=error)


def _record_preemption(step: PlannedStep, attempt: Attempt, lease: Lease, preemption: dict[str, Any]) -> None:
    """Add a RUNNING event carrying `preempted` (the lost replica and its node): the step goes on."""
    if lease.still_held():
        attempt.events.append(event(StepState.RUNNING, preempted=preemption))
        write_status(step.output_path, step.name, step.key, attempt.events)


def _stop(cluster: Cluster, future: Any, lease: Lease) -> None:
    """Cancel a step whose lease was lost (taken over) or given up (its heartbeat kept failing)."""
    reason = (
        str(lease.given_up)
        if lease.given_up is not None
        else f"step {lease.step!r} lost its lease on {lease.output_path}; another runner took it over"
    )
    cluster.cancel(future, reason=reason)


# 5. Record.


def record(
    step: PlannedStep,
    lease: Lease,
    attempt: Attempt,
    ended: TaskEnd,
    deps: Sequence[PlannedStep],
    settings: ExecutionSettings,
) -> Outcome:
    """Write what the attempt came to: SUCCESS (its records first), FAILED, LOST or INTERRUPTED."""
    if ended.ending == Ending.INTERRUPTED:
        return _interrupted(step, settings.interrupt, attempt)
    if ended.ending != Ending.RETURNED:
        return _record_failure(step, lease, attempt, ended, settings)
    out = step.output_path
    # The one ownership check: a runner that lost the lease must not touch the new holder's records.
    # The folder's listing (which the manifest needs anyway) shows a takeover's higher generation,
    # so the check costs one read of our own lease file.
    entries = list(storage.walk_files(out))
    if not lease.still_held(names=[rel for rel, _ in entries if "/" not in rel]):
        raise LeaseLostError(f"step {step.name!r} lost its lease on {out}; another runner took it over")
    ended_at = time.time()
    info = step_info(step, deps, settings.prefix, settings.memo, attempt.started, ended_at)
    write_records(out, info, ended.result, entries)
    attempt.events.append(event(StepState.SUCCESS))
    write_status(out, step.name, step.key, attempt.events)  # last: only now is the output done
    attempt.checked = True
    return Outcome(RunOutcome.SUCCEEDED, result=ended.result, seconds=ended_at - attempt.started)


def _interrupted(step: PlannedStep, interrupt: Interrupt, attempt: Attempt) -> Outcome:
    """Record a step the runner cancelled because it was told to stop: INTERRUPTED, retried next run."""
    reason = interrupt.reason or "the step got KeyboardInterrupt (Ctrl-C)"
    storage.append_bytes(attempt.log_path, f"\n[marin] step {step.name!r} interrupted: {reason}\n".encode())
    attempt.events.append(event(StepState.INTERRUPTED, error=reason))
    write_status(step.output_path, step.name, step.key, attempt.events)
    return Outcome(RunOutcome.INTERRUPTED, error=reason, seconds=time.time() - attempt.started)


def _record_failure(
    step: PlannedStep, lease: Lease, attempt: Attempt, ended: TaskEnd, settings: ExecutionSettings
) -> Outcome:
    """Record a step whose code raised (FAILED) or whose process was lost (LOST): the status, the
    traceback in its log; reported with the log's last lines.

    A step whose lease was given up is recorded only if the lease file is still ours and fresh,
    since storage is failing and another runner may be about to take the step over.
    """
    lost = ended.ending == Ending.LOST
    message = _format_error(ended.error, step)
    if lost:
        number = attempt.events[-1].attempt if attempt.events[-1].attempt is not None else 1
        retry = (
            f"the next run retries it (attempt {number + 1} of {settings.max_attempts})"
            if number < settings.max_attempts
            else f"it was lost {number} times: pass force_run_failed=True (or --force-run-failed) to retry"
        )
        message = f"lost: its process ended from outside its code; {retry}\n{message}"
    try:
        if lease.given_up is None or lease.file_is_current(settings.lease_timeout):
            output = tail(attempt.log_path, lines=20)
            if output:
                message += "\nlast lines of its log:\n" + textwrap.indent(output, "  | ")
            verb = "was lost" if lost else "failed"
            storage.append_bytes(
                attempt.log_path, f"\n[marin] step {step.name!r} {verb}:\n{message}\n".encode()
            )
            attempt.events.append(event(StepState.LOST if lost else StepState.FAILED, error=message[-4000:]))
            write_status(step.output_path, step.name, step.key, attempt.events)
    except Exception:
        if lease.given_up is None:
            raise
        logger.warning(
            "could not record the end of step %r in %s", step.name, step.output_path, exc_info=True
        )
    kind = RunOutcome.LOST if lost else RunOutcome.FAILED
    reported = not lost and is_reported(ended.error)
    return Outcome(kind, error=message, seconds=time.time() - attempt.started, reported=reported)


def _adopt(
    step: PlannedStep,
    lease: Lease,
    deps: Sequence[PlannedStep],
    settings: ExecutionSettings,
    foreign: Sequence[str],
) -> Outcome:
    """Take the existing folder as the step's SUCCESS output without running `fn` (`adopt=True`):
    `.executor_info` says `"adopted": true` and lists the folder's files."""
    if not lease.still_held():
        raise LeaseLostError(
            f"step {step.name!r} lost its lease on {step.output_path}; another runner took it over"
        )
    out = step.output_path
    now = time.time()
    info = step_info(
        step, deps, settings.prefix, settings.memo, now, now, adopted=True, manifest=manifest(out)
    )
    write_records(out, info, None)
    write_status(out, step.name, step.key, [event(StepState.SUCCESS, key=step.key, adopted=True)])
    logger.info("step %r adopted the existing folder %s (%d entries)", step.name, out, len(foreign))
    return Outcome(RunOutcome.SUCCEEDED, seconds=time.time() - now)


def _format_error(error: BaseException, step: PlannedStep) -> str:
    """The error's line, where to read more, then its traceback: the first line is what a reader
    needs (`marin run` prints it alone), the rest what a debugger does."""
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    where = f"(step {step.name!r}; log: {step.output_path}/{LOG_FILE}; output: {step.output_path})"
    return f"{error_line(error)}\n{where}\n{text.rstrip()}"
