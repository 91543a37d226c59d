"""One step's life under its lease: acquire, prepare the output, run through the cluster, record.

The order is what makes a crash safe:
1. take the lease (or wait for the runner holding it, then reuse what it made);
2. re-read the status under the lease: a SUCCESS with this key is reused, never redone; an
   unreadable status has the folder's contents moved aside (never deleted), and the log says where;
   a non-empty folder with no status of this step is not ours: `OutputConflictError` (or, with
   `adopt=True`, it becomes the step's SUCCESS output without running `fn`);
3. clear what a failed or killed attempt left, unless the step is resumable, that attempt had its
   key, and it is resumed (not named in `force_run`; a failed one only under `force_run_failed`);
   a SUCCESS output (another key, or forced) is moved aside, never deleted;
4. write RUNNING, then run the task on the cluster while the runner's heartbeat renews the lease
   (a lost lease cancels the task: the cluster kills its process where it can; a lease the
   heartbeat gave up, its storage failing, also fails the step with `LeaseGivenUpError`);
5. check the lease is still ours, write `.executor_info` and `.artifact.json`, then SUCCESS last.
A runner stopped by SIGINT/SIGTERM (`Interrupt`) cancels its running tasks through the cluster and
records them INTERRUPTED, never SUCCESS.
"""

from __future__ import annotations

import functools
import logging
import textwrap
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

import storage
from fray.cluster import Cluster
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
    STATUS_FILE,
    Event,
    StatusRecord,
    event,
    is_status_temp,
    read_status,
    write_status,
)
from marin.execution.task import StepTask

logger = logging.getLogger("marin.execution")


class Outcome(msgspec.Struct, frozen=True):
    """How a step ended in this run: succeeded (ran here), reused (another runner made it) or failed."""

    kind: RunOutcome
    result: Any = None
    error: str = ""  # a failure's formatted error: its first line is the error itself (`error_line`)
    seconds: float | None = None
    reported: bool = False  # a failure raised on purpose with a message for the user (`is_reported`)


class ExecutionSettings(msgspec.Struct, frozen=True):
    """What every step of one run shares."""

    prefix: str
    cluster: Cluster
    heartbeat: Heartbeat
    lease_timeout: float
    forced: frozenset[str]
    force_run_failed: bool
    run_started: float
    on_wait: Callable[[str, LeaseInfo], None]
    interrupt: Interrupt | None = None
    # How many steps' functions run at once, when the runner drives more steps than that (an object
    # store: the lease and record round trips of other steps overlap the running ones).
    slots: threading.Semaphore | None = None
    # What `.executor_info` records that is the same for every step of the run (git state by module).
    memo: dict[Any, Any] = msgspec.field(default_factory=dict)


def execute_step(
    step: PlannedStep, dep_paths: Mapping[str, str], deps: list[PlannedStep], settings: ExecutionSettings
) -> Outcome:
    """Run `step` to an Outcome; never raises (an unexpected error is a failed Outcome)."""
    if step.conflict:
        return Outcome(RunOutcome.FAILED, error=step.conflict)
    try:
        check_no_symlinks(step.name, settings.prefix, step.output_path)  # again: the plan may be old
        while True:
            lease_or_outcome = _acquire(step, settings)
            if isinstance(lease_or_outcome, Outcome):
                return lease_or_outcome
            try:
                return _run_holding(step, lease_or_outcome, dep_paths, deps, settings)
            except LeaseLostError:
                continue  # another runner took the step over: wait for it and reuse its output
    except Exception as e:  # the runner's own machinery failed (storage, pickling): report, don't hang
        return Outcome(RunOutcome.FAILED, error=_format_error(e, step), reported=is_reported(e))


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
        if settings.interrupt is not None and settings.interrupt.is_set:
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
    """The outcome another runner reached for this very key: a SUCCESS to reuse, or a fresh failure."""
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


def _run_holding(
    step: PlannedStep,
    lease: Lease,
    dep_paths: Mapping[str, str],
    deps: list[PlannedStep],
    settings: ExecutionSettings,
) -> Outcome:
    out = step.output_path
    checked = False  # set once the records are written under a lease just checked to be ours
    try:
        moved_to = None
        # The listing taken with the lease says whether there is a status to read, and what else is there.
        listing = lease.listing
        try:
            status = (
                None if listing is not None and STATUS_FILE not in listing else read_status(out, strict=True)
            )
        except UnreadableRecordError as e:
            listing = None  # the folder changed: list it again
            status = None
            moved_to = move_aside(
                out,
                AsideKind.UNREADABLE,
                "",
                step.name,
                f"unreadable status: {e.why}",
                keep=is_lease_file,
                target=step.aside_path,
            )
            logger.warning(
                "step %r: %s; the folder's contents were moved aside to %s", step.name, e, moved_to
            )
        if status is None or status.name != step.name:
            foreign = (
                foreign_entries(out)
                if listing is None
                else sorted(n for n in listing if not is_lease_file(n) and not is_status_temp(n))
            )
            if foreign and (status is not None or not step.spec.adopt):
                other = f" (the output of step {status.name!r})" if status is not None else ""
                error = OutputConflictError(step.name, out, other)
                return Outcome(RunOutcome.FAILED, error=f"{type(error).__name__}: {error}")
            if foreign:
                if not lease.still_held():
                    raise LeaseLostError(
                        f"step {step.name!r} lost its lease on {out}; another runner took it over"
                    )
                return _adopt(step, deps, settings, foreign)
        events: list[Event] = list(status.events) if status is not None else []
        if status is not None and status.key == step.key:
            finished = _finished_elsewhere(step, settings, status)
            if finished is not None:
                return finished
            if (
                status.state == StepState.FAILED
                and not settings.force_run_failed
                and step.name not in settings.forced
            ):
                return Outcome(
                    RunOutcome.FAILED,
                    error=f"failed in an earlier run; see {out}/{LOG_FILE}; pass "
                    "force_run_failed=True to retry",
                )
        keep_partial = resumes(
            step.spec.resumable, step.name in settings.forced, settings.force_run_failed, step.key, status
        )
        prepare_output(out, status, keep_partial, listing)
        started = time.time()
        # The deps' paths let `marin gc` keep what an unfinished output depends on (it has no .executor_info).
        events.append(event(StepState.RUNNING, key=step.key, deps=tuple(d.output_path for d in deps)))
        # On disk from now on: a killed attempt reads as interrupted (a retry), not as its previous state.
        write_status(out, step.name, step.key, events)
        context = StepContext(step.name, out, settings.prefix, dict(dep_paths))
        log_path = f"{out}/{LOG_FILE}"
        if moved_to is not None:
            storage.append_bytes(
                log_path,
                f"[marin] the unreadable .executor_status of {out} and the folder's "
                f"contents were moved aside to {moved_to}\n".encode(),
            )
        interrupt = settings.interrupt
        future = None
        slot = settings.slots
        if slot is not None:
            slot.acquire()
        try:
            # Inside the try: a submit that raises (pickling, an unreachable cluster) is the step's failure.
            future = settings.cluster.submit_inline(
                StepTask(step.spec.fn, context, settings.memo),
                name=step.name,
                resources=step.spec.resources,
                log_path=log_path,
                # Emptied above (or never there): the cluster need not fetch an earlier log to append to.
                new_log=moved_to is None
                and (not keep_partial or (listing is not None and LOG_FILE not in listing)),
            )
            if interrupt is not None:
                interrupt.register(future, step.name)
            if hasattr(future, "on_preemption"):  # a gang: record each lost replica that restarted it
                future.on_preemption(functools.partial(_record_preemption, step, events, lease))
            stop = functools.partial(_stop, settings.cluster, future, lease)
            lease.on_lost.append(stop)
            if lease.lost:  # lost before the callback was in place
                stop()
            result = future.result()
        except BaseException as e:  # the step's own failure, whatever it raised
            # A Ctrl-C in a terminal also reaches the step's process (KeyboardInterrupt), maybe first.
            if (
                interrupt is not None
                and (interrupt.is_set or isinstance(e, KeyboardInterrupt))
                and lease.still_held()
            ):
                return _interrupted(step, interrupt, events, log_path, started)
            if lease.given_up is None and not lease.still_held():
                # Stopped (or failed) after a takeover: the new holder owns the records.
                raise LeaseLostError(
                    f"step {step.name!r} lost its lease on {out}; another runner took it over"
                ) from e
            return _fail(step, lease, e, events, log_path, started, settings.lease_timeout)
        finally:
            if slot is not None:
                slot.release()
            if interrupt is not None and future is not None:
                interrupt.unregister(future)
        if (
            interrupt is not None and interrupt.is_set and lease.still_held()
        ):  # never SUCCESS once told to stop
            return _interrupted(step, interrupt, events, log_path, started)
        if lease.given_up is not None:  # ended on its own just as its lease was given up
            return _fail(step, lease, lease.given_up, events, log_path, started, settings.lease_timeout)
        # The one ownership check: a runner that lost the lease must not touch the new holder's records.
        # The folder's listing (which the manifest needs anyway) shows a takeover's higher generation,
        # so the check costs one read of our own lease file.
        entries = list(storage.walk_files(out))
        if not lease.still_held(names=[rel for rel, _ in entries if "/" not in rel]):
            raise LeaseLostError(f"step {step.name!r} lost its lease on {out}; another runner took it over")
        ended = time.time()
        info = step_info(step, deps, settings.prefix, settings.memo, started, ended)
        write_records(out, info, result, entries)
        events.append(event(StepState.SUCCESS))
        write_status(out, step.name, step.key, events)  # last: only now is the output done
        checked = True
        return Outcome(RunOutcome.SUCCEEDED, result=result, seconds=ended - started)
    finally:
        settings.heartbeat.discard(lease)
        try:
            lease.release(just_checked=checked)
        except Exception:
            if lease.given_up is None:
                raise
            # The storage that failed the heartbeat fails this too: the file goes stale instead.
            logger.warning("could not release the given-up lease on %s", out, exc_info=True)


def _record_preemption(
    step: PlannedStep, events: list[Event], lease: Lease, preemption: dict[str, Any]
) -> None:
    """Add a RUNNING event carrying `preempted` (the lost replica and its node): the step goes on."""
    if lease.still_held():
        events.append(event(StepState.RUNNING, preempted=preemption))
        write_status(step.output_path, step.name, step.key, events)


def _stop(cluster: Cluster, future: Any, lease: Lease) -> None:
    """Cancel a step whose lease was lost (taken over) or given up (its heartbeat kept failing)."""
    reason = (
        str(lease.given_up)
        if lease.given_up is not None
        else f"step {lease.step!r} lost its lease on {lease.output_path}; another runner took it over"
    )
    cluster.cancel(future, reason=reason)


def _interrupted(
    step: PlannedStep, interrupt: Interrupt, events: list[Event], log_path: str, started: float
) -> Outcome:
    """Record a step the runner cancelled because it was told to stop: INTERRUPTED, retried next run."""
    reason = interrupt.reason or "the step got KeyboardInterrupt (Ctrl-C)"
    storage.append_bytes(log_path, f"\n[marin] step {step.name!r} interrupted: {reason}\n".encode())
    events.append(event(StepState.INTERRUPTED, error=reason))
    write_status(step.output_path, step.name, step.key, events)
    return Outcome(RunOutcome.INTERRUPTED, error=reason, seconds=time.time() - started)


def _adopt(
    step: PlannedStep, deps: list[PlannedStep], settings: ExecutionSettings, foreign: list[str]
) -> Outcome:
    """Take the existing folder as the step's SUCCESS output without running `fn` (`adopt=True`):
    `.executor_info` says `"adopted": true` and lists the folder's files."""
    out = step.output_path
    now = time.time()
    info = step_info(
        step, deps, settings.prefix, settings.memo, now, now, adopted=True, manifest=manifest(out)
    )
    write_records(out, info, None)
    write_status(out, step.name, step.key, [event(StepState.SUCCESS, key=step.key, adopted=True)])
    logger.info("step %r adopted the existing folder %s (%d entries)", step.name, out, len(foreign))
    return Outcome(RunOutcome.SUCCEEDED, seconds=time.time() - now)


def _fail(
    step: PlannedStep,
    lease: Lease,
    error: BaseException,
    events: list[Event],
    log_path: str,
    started: float,
    lease_timeout: float,
) -> Outcome:
    """Record a step's failure (FAILED in its status, the traceback in its log) and report it.

    A step whose lease was given up fails with that `LeaseGivenUpError` (its own error is only the
    cancellation); it is recorded only if the lease file is still ours and fresh, since storage is
    failing and another runner may be about to take the step over.
    """
    out = step.output_path
    if lease.given_up is not None:
        error = lease.given_up
    message = _format_error(error, step)
    try:
        if lease.given_up is None or lease.file_is_current(lease_timeout):
            output = tail(log_path, lines=20)
            if output:
                message += "\nlast lines of its log:\n" + textwrap.indent(output, "  | ")
            storage.append_bytes(log_path, f"\n[marin] step {step.name!r} failed:\n{message}\n".encode())
            events.append(event(StepState.FAILED, error=message[-4000:]))
            write_status(out, step.name, step.key, events)
    except Exception:
        if lease.given_up is None:
            raise
        logger.warning("could not record the failure of step %r in %s", step.name, out, exc_info=True)
    return Outcome(
        RunOutcome.FAILED, error=message, seconds=time.time() - started, reported=is_reported(error)
    )


def _format_error(error: BaseException, step: PlannedStep) -> str:
    """The error's line, where to read more, then its traceback: the first line is what a reader
    needs (`marin run` prints it alone), the rest what a debugger does."""
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    where = f"(step {step.name!r}; log: {step.output_path}/{LOG_FILE}; output: {step.output_path})"
    return f"{error_line(error)}\n{where}\n{text.rstrip()}"


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
