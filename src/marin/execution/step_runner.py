"""StepRunner: plan a DAG of steps, then run what is not cached, in parallel, through a fray Cluster.

The scheduler is event-driven: the driver thread that finishes a step records it and starts whatever
became ready (running one of those itself), and the main thread wakes only when the run is over or
a signal arrives. It never sleeps on a timer (the only polling is a step
waiting for *another process's* lease, which nothing can signal across processes).

When a step fails it is marked FAILED, the steps that depend on it are reported blocked, the
independent branches run to the end, and `run` then raises `StepFailedError` listing every failure
with its traceback and log location.

SIGINT or SIGTERM (in the main thread) stops the run: the runner cancels its running steps through
the cluster, records them INTERRUPTED (retried by the next run), and raises `RunInterruptedError`;
a second signal exits the process at once.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

import storage
from fray.cluster import Cluster
from fray.cluster.select import cluster_from_env
from marin.execution.discover import defer_run
from marin.execution.errors import RunInterruptedError, StepFailedError
from marin.execution.lazy import LazyStep, lower
from marin.execution.lease import DEFAULT_LEASE_TIMEOUT_S, LeaseInfo
from marin.execution.plan import Plan, PlannedStep, build_plan, resolve_prefix
from marin.execution.progress import Progress
from marin.execution.states import PlanState, RunOutcome
from marin.execution.step_spec import StepSpec

if TYPE_CHECKING:
    from marin.execution.interrupt import Interrupt
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
    `progress`: print the plan and one line per step to stderr (and, on the default LocalCluster, each
    running step's output lines, prefixed with its name).
    """

    def __init__(
        self,
        prefix: str | None = None,
        max_concurrent: int | None = None,
        cluster: Cluster | None = None,
        *,
        lease_timeout: float = DEFAULT_LEASE_TIMEOUT_S,
        heartbeat_interval: float | None = None,
        progress: bool = True,
    ):
        self.prefix = resolve_prefix(prefix)
        self.max_concurrent = max(1, max_concurrent or os.cpu_count() or 1)
        self.cluster = cluster
        self.lease_timeout = lease_timeout
        self.heartbeat_interval = heartbeat_interval or max(0.05, lease_timeout / 4)
        self.progress = progress

    def plan(
        self,
        steps: Iterable[StepSpec | LazyStep],
        force_run: Iterable[str] = (),
        force_run_failed: bool = False,
    ) -> Plan:
        """The plan for `steps` and everything they depend on; reads statuses, runs nothing."""
        roots = [lower(s) for s in _as_list(steps)]
        return build_plan(roots, self.prefix, force_run, force_run_failed, self.lease_timeout)

    def run(
        self,
        steps: Iterable[StepSpec | LazyStep] | StepSpec,
        dry_run: bool = False,
        force_run: Sequence[str] = (),
        force_run_failed: bool = False,
    ) -> RunResult | Plan:
        """Run `steps` and their dependencies; with `dry_run`, print and return the Plan instead.

        Raises StepFailedError after every runnable step has finished if any step failed.
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
        return _Run(self, plan, frozenset(force_run), force_run_failed, started).execute()


def _as_list(steps: Any) -> list[Any]:
    if isinstance(steps, StepSpec) or isinstance(steps, LazyStep):
        return [steps]
    return list(steps)


class _Run:
    """One execution of a plan: the ready queue, the events, and what has finished."""

    def __init__(
        self, runner: StepRunner, plan: Plan, forced: frozenset[str], force_run_failed: bool, started: float
    ):
        self.runner = runner
        self.plan = plan
        self.steps = plan.steps
        self.result = RunResult(plan)
        self.failures: dict[str, str] = {}
        self.reported = True  # every failure so far was raised on purpose (bad input, not a bug)
        self.blocked: list[str] = []
        self.forced = forced
        self.force_run_failed = force_run_failed
        self.started = started
        runnable = [s for s in self.steps if s.state != PlanState.CACHED]
        self.progress = Progress(len(runnable), enabled=runner.progress)

    def execute(self) -> RunResult:
        steps = self.steps
        outcomes = self.result.outcomes
        pending = []
        for i, s in enumerate(steps):
            if s.state == PlanState.CACHED:
                outcomes[s.output_path] = RunOutcome.CACHED
            else:
                pending.append(i)
        if self.runner.progress:
            if pending:
                from marin.execution.plan_view import print_plan

                print_plan(self.plan, max_rows=_PLAN_ROWS)  # the whole plan: `marin plan` / dry_run
            else:
                print(self.plan.summary(), file=sys.stderr)
        if not pending:
            return self.result
        self._schedule(pending)
        if self.failures or self.blocked:
            raise StepFailedError(self.failures, self.blocked, reported=self.reported)
        return self.result

    def _schedule(self, pending: list[int]) -> None:
        # Only a run that executes steps needs this machinery: a fully cached run never imports it.
        from marin.execution.drivers import Drivers, install_signal_handlers
        from marin.execution.heartbeat import Heartbeat
        from marin.execution.interrupt import Interrupt
        from marin.execution.run_provenance import environment
        from marin.execution.step_execution import ExecutionSettings, execute_step

        self._execute_step = execute_step
        steps = self.steps
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
        done_events: queue.SimpleQueue[tuple[int, Outcome]] = queue.SimpleQueue()
        own_cluster = self.runner.cluster is None
        cluster = self.runner.cluster or cluster_from_env(
            self.plan.prefix, max_workers=self.runner.max_concurrent, echo=self.runner.progress
        )
        heartbeat = Heartbeat(self.runner.heartbeat_interval, self.runner.lease_timeout)
        # On an object store each step spends most of its time on round trips (lease, status, records):
        # more steps are driven at once, and a semaphore keeps `max_concurrent` functions running.
        max_concurrent = self.runner.max_concurrent
        max_drivers = (
            max_concurrent if storage.is_local(self.plan.prefix) else max(max_concurrent, REMOTE_DRIVERS)
        )
        slots = threading.BoundedSemaphore(max_concurrent) if max_drivers > max_concurrent else None
        interrupt = Interrupt(cluster)
        settings = ExecutionSettings(
            self.plan.prefix,
            cluster,
            heartbeat,
            self.runner.lease_timeout,
            self.forced,
            self.force_run_failed,
            self.started,
            self._on_wait,
            interrupt,
            slots,
        )
        # `.executor_info` records the installed distributions: read them (once per process, ~0.5 s)
        # while the first steps run rather than when the first one finishes.
        threading.Thread(target=environment, name="marin-environment", daemon=True).start()
        # The drivers schedule: a driver that finishes a step records it and starts what became
        # ready, running one of those itself, so a step changes threads only where steps fan out.
        # The main thread sleeps until the run is over or a signal arrives (its handler's event).
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)  # notified as each step finishes
        self._ready, self._children, self._waiting_on = ready, children, waiting_on
        self._in_flight, self._max_drivers = 0, max_drivers
        self._settings, self._done_events, self._interrupt = settings, done_events, interrupt
        self._drivers = drivers = Drivers(max_drivers, self._drive)
        restore = install_signal_handlers(done_events, interrupt)
        try:
            with self._lock:
                self._start_ready(None)
                over = not self._in_flight
            while not over:
                i, event = done_events.get()
                if i == _CRASHED:
                    raise event
                if i == _SIGNAL:
                    self._stop(interrupt, str(event))
                over = i == _ALL_DONE
            if interrupt.is_set:
                # A terminal's Ctrl-C reaches the step's process too, and its outcome can arrive before
                # the signal's own event: the handler runs only once the main thread wakes for it.
                self._stop(interrupt, interrupt.signal_name or "a signal")
        finally:
            # After an interrupt a step that cannot be stopped (a ThreadCluster's) is not waited for.
            drivers.shutdown(wait=not interrupt.is_set)
            heartbeat.stop()
            if not interrupt.is_set:
                restore()  # after an interrupt the handler stays: a second signal exits at once
            if own_cluster:
                if interrupt.is_set and isinstance(cluster, _local_cluster_type()):
                    cluster.shutdown(kill_running=True)
                elif not interrupt.is_set:
                    cluster.shutdown()

    def _start_ready(self, keep: bool | None) -> int | None:
        """Hand ready steps to drivers, up to `max_drivers` in flight (under self._lock); with `keep`,
        the first is returned for the calling driver to run itself instead."""
        kept = None
        while self._ready and self._in_flight < self._max_drivers:
            i = self._ready.pop()
            if self.steps[i].state == PlanState.BLOCKED:
                self._block(i, self.steps[i].reason, self._children, self._waiting_on)
                continue
            self._in_flight += 1
            if keep and kept is None:
                kept = i
            else:
                self._drivers.submit((i,))
        return kept

    def _drive(self, i: int) -> None:
        """Run step `i`, then each step this driver keeps from those that became ready (see _schedule)."""
        try:
            while i is not None:
                step = self.steps[i]
                dep_steps = [self.steps[d] for d in step.deps]
                self.progress.note(f"start     {step.name}")
                outcome = self._execute_step(
                    step, {d.name: d.output_path for d in dep_steps}, dep_steps, self._settings
                )
                with self._lock:
                    self._in_flight -= 1
                    line = self._finish(i, outcome)
                    if outcome.kind == RunOutcome.FAILED:
                        self._block_dependents(i, self._children, self._waiting_on)
                    else:
                        for c in self._children.get(i, ()):
                            self._waiting_on[c] -= 1
                            if self._waiting_on[c] == 0:
                                self._ready.append(c)
                    # Once interrupted no step starts: the main thread is recording the run's end.
                    i = None if self._interrupt.is_set else self._start_ready(True)
                    over = not self._in_flight
                    self._settled.notify_all()
                if line is not None:
                    self.progress.step_done(*line)
                if over:
                    self._done_events.put((_ALL_DONE, None))
        except BaseException as e:  # the scheduling itself failed: the main thread raises it
            self._done_events.put((_CRASHED, e))
            raise

    def _stop(self, interrupt: Interrupt, signal_name: str) -> None:
        """Cancel the running steps, wait briefly for them to be recorded INTERRUPTED, then raise."""
        interrupt.trigger(f"the runner got {signal_name}")
        deadline = time.monotonic() + _STOP_WAIT_S
        with self._lock:
            while self._in_flight and (left := deadline - time.monotonic()) > 0:
                self._settled.wait(left)
            in_flight = self._in_flight
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
            message += f"; {in_flight} step(s) could not be stopped in {_STOP_WAIT_S:g}s (press Ctrl-C again to exit)"
        raise RunInterruptedError(message)

    def _on_wait(self, name: str, holder: LeaseInfo) -> None:
        self.progress.note(f"waiting   {name}: lease held by {holder.describe()}")

    def _finish(self, i: int, outcome: Outcome) -> tuple | None:
        """Record how step `i` ended (under self._lock); a success's progress line is returned for
        the caller to print once it let go of the lock (a failure's is printed here, before the
        lines of the dependents it blocks)."""
        step = self.steps[i]
        self.result.outcomes[step.output_path] = outcome.kind
        if outcome.kind == RunOutcome.INTERRUPTED:
            self.progress.step_done(RunOutcome.INTERRUPTED, step.name, outcome.seconds, outcome.error)
        elif outcome.kind == RunOutcome.FAILED:
            self.failures[step.name] = outcome.error
            self.reported &= outcome.reported
            self.progress.step_done(
                RunOutcome.FAILED, step.name, outcome.seconds, f"log: {step.output_path}/.executor_log"
            )
        else:
            if outcome.result is not None:
                self.result.results[step.output_path] = outcome.result
            return outcome.kind, step.name, outcome.seconds
        return None

    def _block(self, i: int, reason: str, children, waiting_on) -> None:
        """A step the plan found blocked: its earlier failure counts as a failure of this run."""
        step = self.steps[i]
        if step.conflict:  # its output folder holds files marin did not write: fails before fn runs
            self.failures[step.name] = step.conflict
        elif step.status is not None and step.status.key == step.key:  # failed before, not retried
            self.failures[step.name] = f"{reason}; log: {step.output_path}/.executor_log"
        else:
            self.blocked.append(step.name)
        self.result.outcomes[step.output_path] = RunOutcome.BLOCKED
        self.progress.step_done(RunOutcome.BLOCKED, step.name, detail=reason)
        self._block_dependents(i, children, waiting_on)

    def _block_dependents(self, i: int, children, waiting_on) -> None:
        stack = list(children.get(i, ()))
        while stack:
            c = stack.pop()
            if waiting_on.get(c, 0) < 0:
                continue
            waiting_on[c] = -1  # never becomes ready
            step: PlannedStep = self.steps[c]
            self.blocked.append(step.name)
            self.result.outcomes[step.output_path] = RunOutcome.BLOCKED
            self.progress.step_done(RunOutcome.BLOCKED, step.name, detail="a dependency of it failed")
            stack.extend(children.get(c, ()))


REMOTE_DRIVERS = 32  # steps driven at once under an object-store prefix (see `_schedule`)
_PLAN_ROWS = 50  # rows of the plan table a run prints; rich renders about 1,000 rows a second


_STOP_WAIT_S = 3.0  # how long an interrupted run waits for its cancelled steps to be recorded
# The events on the main thread's queue: a signal's (its handler's, see drivers.py), and the drivers'.
_SIGNAL, _ALL_DONE, _CRASHED = -1, -2, -3


def _local_cluster_type() -> type:
    from fray.cluster import LocalCluster  # loaded (fray.cluster loads it lazily) once a run executes steps

    return LocalCluster
