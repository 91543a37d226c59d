"""StepRunner: plan a DAG of steps, then run what is not cached, in parallel, through a fray Cluster.

The scheduler is event-driven. Each step is driven (`step_execution.execute_step`) by a call on
fray's shared thread pool (`fray.cluster.threads`), which LocalCluster's dispatch shares: the driver
that finishes a step records it and starts whatever became ready, keeping one of those for its own
thread (`ThreadPool.defer`), and the main thread wakes only when the run is over or a signal
arrives. It never sleeps on a timer (the only polling is a step waiting for *another process's*
lease, which nothing can signal across processes).

When a step fails (its code raised: FAILED) or is lost (its process was killed or its node lost:
LOST, which the next run retries), the steps that depend on it are reported blocked, the
independent branches run to the end, and `run` then raises `StepFailedError` listing every failure
with its traceback and log location.

SIGINT or SIGTERM (in the main thread) stops the run: the runner cancels its running steps through
the cluster, each given `stop_grace_s` to end by itself (a training finishes its step and writes its
checkpoint), waits for them a little longer than that, records them INTERRUPTED (retried by the next
run, a training resuming from that checkpoint), and raises `RunInterruptedError`; a second signal
exits the process at once.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

import storage
from fray.cluster import Cluster
from fray.cluster.select import cluster_from_env
from marin.execution.discover import defer_run
from marin.execution.errors import RunInterruptedError, StepFailedError
from marin.execution.interrupt import DEFAULT_STOP_GRACE_S
from marin.execution.lazy import LazyStep, lower
from marin.execution.lease import DEFAULT_LEASE_TIMEOUT_S, LeaseInfo
from marin.execution.plan import Plan, PlannedStep, build_plan, resolve_prefix
from marin.execution.progress import Progress
from marin.execution.states import PlanState, RunOutcome
from marin.execution.status import DEFAULT_MAX_ATTEMPTS
from marin.execution.step_spec import StepSpec

if TYPE_CHECKING:
    from marin.execution.step_execution import Outcome


class RunResult(msgspec.Struct):
    """What a run did: the plan it followed, how each step ended, and what the steps that ran returned."""

    plan: Plan
    outcomes: dict[str, RunOutcome] = msgspec.field(default_factory=dict)  # output path -> how its step ended
    results: dict[str, Any] = msgspec.field(
        default_factory=dict
    )  # output path -> the value the step returned

    def output_path(self, step: StepSpec | LazyStep) -> str:
        """Where `step` (a spec or lazy handle of this run) wrote its output."""
        return self.plan.of(step).output_path


class StepRunner:
    """Runs StepSpecs (or lazy handles) under a prefix: plans, skips cached steps, executes the rest.

    `prefix`: where outputs live (else $MARIN_PREFIX, else ./marin-outputs). `max_concurrent`: how
    many steps' functions run at once (default: the CPU count; on an object store up to 32 steps
    are driven at once, so that their storage round trips overlap). `cluster`: where steps run (default: the one
    $MARIN_CLUSTER names, else a fray LocalCluster, steps in warm worker processes; see docs/clusters.md).
    `lease_timeout`: seconds without a heartbeat after which another runner may take a step over.
    `max_attempts`: how many attempts of one step (one key) may be lost (its process killed, its
    node gone) before the step is no longer retried automatically (see docs/execution.md, "When a
    step is retried"). `progress`: print the plan and one line per step to stderr (and, on the
    default LocalCluster, each running step's output lines, prefixed with its name). `stop_grace_s`:
    how long a step the runner stops on SIGINT/SIGTERM may take to end by itself (a training
    finishes its step and writes a checkpoint) before its process is killed; the runner waits for
    its steps a little longer than that, and a second signal stops it at once.
    """

    def __init__(
        self,
        prefix: str | None = None,
        max_concurrent: int | None = None,
        cluster: Cluster | None = None,
        *,
        lease_timeout: float = DEFAULT_LEASE_TIMEOUT_S,
        heartbeat_interval: float | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        progress: bool = True,
        stop_grace_s: float = DEFAULT_STOP_GRACE_S,
    ):
        self.prefix = resolve_prefix(prefix)
        self.max_concurrent = max(1, max_concurrent or os.cpu_count() or 1)
        self.cluster = cluster
        self.lease_timeout = lease_timeout
        self.heartbeat_interval = heartbeat_interval or max(0.05, lease_timeout / 4)
        self.max_attempts = max(1, max_attempts)
        self.progress = progress
        self.stop_grace_s = max(0.0, stop_grace_s)

    def plan(
        self,
        steps: Iterable[StepSpec | LazyStep],
        force_run: Iterable[str] = (),
        force_run_failed: bool = False,
    ) -> Plan:
        """The plan for `steps` and everything they depend on; reads statuses, runs nothing."""
        roots = [lower(s) for s in _as_list(steps)]
        return build_plan(
            roots,
            self.prefix,
            force_run,
            force_run_failed,
            self.lease_timeout,
            max_attempts=self.max_attempts,
        )

    def run(
        self,
        steps: Iterable[StepSpec | LazyStep] | StepSpec,
        dry_run: bool = False,
        force_run: Sequence[str] = (),
        force_run_failed: bool = False,
    ) -> RunResult | Plan:
        """Run `steps` and their dependencies; with `dry_run`, print and return the Plan instead.

        Raises StepFailedError after every runnable step has finished if any step failed or was lost.
        """
        started = time.time()
        if defer_run(steps := _as_list(steps)):  # imported by `marin plan/run`: never execute
            deferred = self.plan(steps, force_run, force_run_failed)
            return deferred if dry_run else RunResult(deferred)
        plan = self.plan(steps, force_run, force_run_failed)
        if dry_run:
            if self.progress:
                from marin.execution.plan_view import print_plan

                print_plan(plan, max_cached_rows=10**9)
            return plan
        result = RunResult(plan)
        pending = []
        for i, s in enumerate(plan.steps):
            if s.state == PlanState.CACHED:
                result.outcomes[s.output_path] = RunOutcome.CACHED
            else:
                pending.append(i)
        if self.progress:
            if pending:
                from marin.execution.plan_view import print_plan

                print_plan(plan, max_rows=_PLAN_ROWS)  # the whole plan: `marin plan` / dry_run
            else:
                print(plan.summary(), file=sys.stderr)
        if not pending:  # a cached run never builds the machinery that runs steps
            return result
        run = _Run(self, result, pending, frozenset(force_run), force_run_failed, started)
        return run.execute()


def _as_list(steps: Any) -> list[Any]:
    if isinstance(steps, StepSpec) or isinstance(steps, LazyStep):
        return [steps]
    return list(steps)


@dataclass(frozen=True)
class Signalled:
    """The main thread got SIGINT or SIGTERM (put by the signal handler)."""

    signal_name: str


@dataclass(frozen=True)
class AllDone:
    """Every step this run started has ended."""


@dataclass(frozen=True)
class Crashed:
    """The scheduling itself failed on a driver thread: the main thread raises `error`."""

    error: BaseException


RunEvent = Signalled | AllDone | Crashed


@dataclass
class _Schedule:
    """Which steps wait for which (by plan index), which are ready, and how the run is going; guarded
    by the run's lock."""

    ready: list[int]  # popped from the end: kept in reverse plan order
    children: dict[int, list[int]]  # a step -> the pending steps that depend on it
    waiting_on: dict[int, int]  # a pending step -> its unfinished dependencies (-1: blocked)
    in_flight: int = 0  # steps handed to a driver and not yet finished
    failures: dict[str, str] = field(default_factory=dict)  # step name -> formatted error
    blocked: list[str] = field(default_factory=list)
    reported: bool = True  # every failure so far was raised on purpose (bad input, not a bug)

    @classmethod
    def of(cls, steps: list[PlannedStep], pending: list[int]) -> _Schedule:
        """The schedule of the `pending` steps (those the plan did not find cached)."""
        children: dict[int, list[int]] = {}
        waiting_on: dict[int, int] = {}
        for i in pending:
            waiting_on[i] = 0
            for d in steps[i].deps:
                if steps[d].state != PlanState.CACHED:
                    waiting_on[i] += 1
                    children.setdefault(d, []).append(i)
        ready = [i for i in pending if waiting_on[i] == 0]
        ready.reverse()  # pop() then starts them in plan order
        return cls(ready, children, waiting_on)


class _Run:
    """One execution of a plan: the schedule, the machinery that runs steps, and the main thread's wait."""

    def __init__(
        self,
        runner: StepRunner,
        result: RunResult,
        pending: list[int],
        forced: frozenset[str],
        force_run_failed: bool,
        started: float,
    ):
        # Only a run that executes steps needs this machinery: a fully cached run never imports it.
        from fray.cluster.threads import shared_pool
        from marin.execution.heartbeat import Heartbeat
        from marin.execution.interrupt import Interrupt
        from marin.execution.step_execution import ExecutionSettings, execute_step

        plan = result.plan
        self.steps = plan.steps
        self.result = result
        self.schedule = _Schedule.of(plan.steps, pending)
        self.progress = Progress(len(pending), enabled=runner.progress)
        self.lock = threading.Lock()
        self.settled = threading.Condition(self.lock)  # notified as each step finishes
        self.events: queue.SimpleQueue[RunEvent] = queue.SimpleQueue()
        self.pool = shared_pool()
        self.execute_step = execute_step
        self.own_cluster = runner.cluster is None
        cluster = runner.cluster or cluster_from_env(
            plan.prefix, max_workers=runner.max_concurrent, echo=runner.progress
        )
        self.interrupt = Interrupt(cluster, runner.stop_grace_s)
        # On an object store each step spends most of its time on round trips (lease, status, records):
        # more steps are driven at once, and a semaphore keeps `max_concurrent` functions running.
        local = storage.is_local(plan.prefix)
        self.max_drivers = runner.max_concurrent if local else max(runner.max_concurrent, REMOTE_DRIVERS)
        slots = (
            threading.BoundedSemaphore(runner.max_concurrent)
            if self.max_drivers > runner.max_concurrent
            else None
        )
        self.settings = ExecutionSettings(
            prefix=plan.prefix,
            cluster=cluster,
            heartbeat=Heartbeat(runner.heartbeat_interval, runner.lease_timeout),
            lease_timeout=runner.lease_timeout,
            forced=forced,
            force_run_failed=force_run_failed,
            run_started=started,
            on_wait=self._on_wait,
            interrupt=self.interrupt,
            max_attempts=runner.max_attempts,
            slots=slots,
        )

    def execute(self) -> RunResult:
        """Run every pending step; raise StepFailedError if any failed (or was lost or blocked by one),
        RunInterruptedError if a signal stopped the run."""
        from marin.execution.interrupt import install_signal_handlers
        from marin.execution.run_provenance import environment

        # `.executor_info` records the installed distributions: read them (once per process, ~0.5 s)
        # while the first steps run rather than when the first one finishes.
        threading.Thread(target=environment, name="marin-environment", daemon=True).start()
        restore = install_signal_handlers(self.interrupt, lambda name: self.events.put(Signalled(name)))
        try:
            self._wait_for_the_end()
        finally:
            self._close(restore)
        if self.schedule.failures or self.schedule.blocked:
            raise StepFailedError(
                self.schedule.failures, self.schedule.blocked, reported=self.schedule.reported
            )
        return self.result

    def _wait_for_the_end(self) -> None:
        """Start the ready steps, then sleep until the run is over or a signal arrives."""
        with self.lock:
            self._start_ready(keep=False)
            over = not self.schedule.in_flight
        while not over:
            event = self.events.get()
            if isinstance(event, Crashed):
                raise event.error
            if isinstance(event, Signalled):
                self._stop(event.signal_name)
            over = isinstance(event, AllDone)
        if self.interrupt.is_set:
            # A terminal's Ctrl-C reaches the step's process too, and its outcome can arrive before
            # the signal's own event: the handler runs only once the main thread wakes for it.
            self._stop(self.interrupt.signal_name or "a signal")

    def _close(self, restore: Callable[[], None]) -> None:
        self.settings.heartbeat.stop()
        interrupted = self.interrupt.is_set
        if not interrupted:
            restore()  # after an interrupt the handler stays: a second signal exits at once
        # After an interrupt a step that could not be stopped (a ThreadCluster's) is not waited for.
        if self.own_cluster and not (interrupted and self.schedule.in_flight):
            self.settings.cluster.shutdown()

    def _start_ready(self, keep: bool) -> None:
        """Hand ready steps to drivers, up to `max_drivers` in flight (under self.lock); with `keep`,
        the first is kept for the calling driver's thread (`ThreadPool.defer`), the rest go to others."""
        schedule = self.schedule
        while schedule.ready and schedule.in_flight < self.max_drivers:
            i = schedule.ready.pop()
            if self.steps[i].state == PlanState.BLOCKED:
                self._block(i, self.steps[i].reason)
                continue
            schedule.in_flight += 1
            if keep:
                self.pool.defer(self._drive, i)
                keep = False
            else:
                self.pool.submit(self._drive, i)

    def _drive(self, i: int) -> None:
        """Run step `i`, record how it ended, and start what became ready (see `_start_ready`)."""
        try:
            if self.interrupt.is_set:  # handed over before the stop: it never starts
                outcome = None
            else:
                step = self.steps[i]
                self.progress.note(f"start     {step.name}")
                outcome = self.execute_step(step, [self.steps[d] for d in step.deps], self.settings)
            with self.lock:
                self.schedule.in_flight -= 1
                line = self._finish(i, outcome) if outcome is not None else None
                # Once interrupted no step starts: the main thread is recording the run's end.
                if not self.interrupt.is_set:
                    self._start_ready(keep=True)
                over = not self.schedule.in_flight
                self.settled.notify_all()
            if line is not None:
                self.progress.step_done(*line)
            if over:
                self.events.put(AllDone())
        except BaseException as e:  # the scheduling itself failed: the main thread raises it
            self.events.put(Crashed(e))
            raise

    def _stop(self, signal_name: str) -> None:
        """Cancel the running steps, wait for them to be recorded INTERRUPTED (a little longer than
        their grace: they end by themselves or are killed), then raise."""
        stopping = self.interrupt.trigger(f"the runner got {signal_name}")
        wait_s = self.interrupt.grace_s + _STOP_MARGIN_S
        if stopping and self.interrupt.grace_s > 0:
            names = ", ".join(sorted(stopping)[:5]) + (", ..." if len(stopping) > 5 else "")
            self.progress.note(
                f"stopping {len(stopping)} running step(s) ({names}): each may take up to "
                f"{self.interrupt.grace_s:g}s to finish cleanly (a training writes its checkpoint); "
                f"{signal_name} again stops at once"
            )
        deadline = time.monotonic() + wait_s
        with self.lock:
            while self.schedule.in_flight and (left := deadline - time.monotonic()) > 0:
                self.settled.wait(left)
            in_flight = self.schedule.in_flight
            stopped = sorted(
                self.steps[i].name
                for i, s in enumerate(self.steps)
                if self.result.outcomes.get(s.output_path) == RunOutcome.INTERRUPTED
            )
        message = (
            f"interrupted by {signal_name}: cancelled {len(stopped)} running step(s)"
            + (f" ({', '.join(stopped[:10])}{', ...' if len(stopped) > 10 else ''})" if stopped else "")
            + ", recorded INTERRUPTED; the next run retries them"
        )
        if in_flight:
            message += (
                f"; {in_flight} step(s) could not be stopped in {wait_s:g}s (press Ctrl-C again to exit)"
            )
        raise RunInterruptedError(message)

    def _on_wait(self, name: str, holder: LeaseInfo) -> None:
        self.progress.note(f"waiting   {name}: lease held by {holder.describe()}")

    def _finish(self, i: int, outcome: Outcome) -> tuple | None:
        """Record how step `i` ended (under self.lock) and release or block its dependents; a success's
        progress line is returned for the caller to print once it let go of the lock (a failure's
        is printed here, before the lines of the dependents it blocks)."""
        step = self.steps[i]
        kind = outcome.kind
        self.result.outcomes[step.output_path] = kind
        if kind in (RunOutcome.FAILED, RunOutcome.LOST):
            self.schedule.failures[step.name] = outcome.error
            self.schedule.reported &= outcome.reported
            detail = f"log: {step.output_path}/.executor_log"
            if kind == RunOutcome.LOST:
                detail = f"{outcome.error.splitlines()[0]}; {detail}"
            self.progress.step_done(kind, step.name, outcome.seconds, detail)
            self._block_dependents(i)
            return None
        for c in self.schedule.children.get(i, ()):
            self.schedule.waiting_on[c] -= 1
            if self.schedule.waiting_on[c] == 0:
                self.schedule.ready.append(c)
        if kind == RunOutcome.INTERRUPTED:
            self.progress.step_done(kind, step.name, outcome.seconds, outcome.error)
            return None
        if outcome.result is not None:
            self.result.results[step.output_path] = outcome.result
        return kind, step.name, outcome.seconds

    def _block(self, i: int, reason: str) -> None:
        """A step the plan found blocked: its earlier failure counts as a failure of this run."""
        step = self.steps[i]
        if step.conflict:  # its output folder holds files marin did not write: fails before fn runs
            self.schedule.failures[step.name] = step.conflict
            self.schedule.reported = False  # as an Outcome(FAILED) of execute_step is
        elif step.status is not None and step.status.key == step.key:  # failed before, not retried
            self.schedule.failures[step.name] = f"{reason}; log: {step.output_path}/.executor_log"
            self.schedule.reported = False
        else:
            self.schedule.blocked.append(step.name)
        self.result.outcomes[step.output_path] = RunOutcome.BLOCKED
        self.progress.step_done(RunOutcome.BLOCKED, step.name, detail=reason)
        self._block_dependents(i)

    def _block_dependents(self, i: int) -> None:
        children, waiting_on = self.schedule.children, self.schedule.waiting_on
        stack = list(children.get(i, ()))
        while stack:
            c = stack.pop()
            if waiting_on.get(c, 0) < 0:
                continue
            waiting_on[c] = -1  # never becomes ready
            step: PlannedStep = self.steps[c]
            self.schedule.blocked.append(step.name)
            self.result.outcomes[step.output_path] = RunOutcome.BLOCKED
            self.progress.step_done(RunOutcome.BLOCKED, step.name, detail="a dependency of it failed")
            stack.extend(children.get(c, ()))


REMOTE_DRIVERS = 32  # steps driven at once under an object-store prefix (see `_Run.__init__`)
_PLAN_ROWS = 50  # rows of the plan table a run prints; rich renders about 1,000 rows a second
# How much longer than the steps' grace an interrupted run waits for them: once killed, a step's
# process is reaped and the step recorded in well under this.
_STOP_MARGIN_S = 3.0
