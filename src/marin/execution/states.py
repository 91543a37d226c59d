"""The engine's state vocabularies, one StrEnum each (a member equals its string, in code and in JSON).

- `StepState`: what `.executor_status` records on disk.
- `PlanState`: what the plan says will happen to a step.
- `RunOutcome`: how a step ended in one run (`RunResult.outcomes`).
- `OutputState`: what `marin status` and the UI show for an output found under a prefix.
"""

from __future__ import annotations

from enum import StrEnum


class StepState(StrEnum):
    """The state in a step's `.executor_status` (and of each of its events)."""

    SUCCESS = "SUCCESS"
    FAILED = "FAILED"
    RUNNING = "RUNNING"
    # The runner was stopped (SIGINT/SIGTERM) and cancelled the step; the next run retries it.
    INTERRUPTED = "INTERRUPTED"
    # Its process was lost (killed from outside, its node gone, its lease given up): the next run
    # retries it, until `max_attempts` attempts of one key were lost.
    LOST = "LOST"


class PlanState(StrEnum):
    """What the plan decided for a step (see `marin.execution.plan`)."""

    CACHED = "cached"
    RUN_NEW = "run: new"
    RUN_CHANGED = "run: changed"
    RUN_RETRY = "run: retry"
    RUN_FORCED = "run: forced"
    WAITING = "waiting"
    BLOCKED = "blocked"


# The plan states of a step this runner runs (or waits for while another runner runs it).
RUN_STATES = frozenset(
    {PlanState.RUN_NEW, PlanState.RUN_CHANGED, PlanState.RUN_RETRY, PlanState.RUN_FORCED, PlanState.WAITING}
)


class RunOutcome(StrEnum):
    """How a step ended in one run."""

    CACHED = "cached"  # the plan found its output: nothing ran
    SUCCEEDED = "succeeded"  # it ran here
    REUSED = "reused"  # another runner made it while this one waited
    FAILED = "failed"  # its own code raised: blocked until force_run_failed
    LOST = "lost"  # its process was lost: the next run retries it
    INTERRUPTED = "interrupted"  # the runner was stopped while it ran
    BLOCKED = "blocked"  # it could not run: a dependency failed or is blocked


class OutputState(StrEnum):
    """The state `marin status` and the UI show for one output under a prefix."""

    SUCCESS = "SUCCESS"
    FAILED = "FAILED"
    RUNNING = "RUNNING"  # a live runner holds its lease
    INTERRUPTED = "INTERRUPTED"  # recorded INTERRUPTED or LOST, or an attempt died without recording an end
    UNREADABLE = "UNREADABLE"  # its status cannot be read
    MOVED_ASIDE = "MOVED-ASIDE"  # a moved-aside copy without a status of its own
