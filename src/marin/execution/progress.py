"""Progress lines for a run, on stderr: one line per step that starts, waits, finishes or fails.

Not zephyr's stage bar (`zephyr.progress`, redrawn in place per shard): a run's steps run side by
side and echo their own output, so each event is one whole line written at once, which stays
readable when interleaved with that output and in a log file.
"""

from __future__ import annotations

import sys
import threading
import time

from marin.execution.states import RunOutcome, StepState

# How a progress line names each outcome: its value, except a failure or a loss, named as its
# .executor_status records it (in capitals) so that it stands out among the lines of a long run.
OUTCOME_LABELS: dict[RunOutcome, str] = {o: str(o) for o in RunOutcome} | {
    RunOutcome.FAILED: str(StepState.FAILED),
    RunOutcome.LOST: str(StepState.LOST),
}


class Progress:
    """Prints `[done/total] event step (seconds)` lines; silent when `enabled` is False."""

    def __init__(self, total: int, enabled: bool = True):
        self.total = total
        self.enabled = enabled
        self.finished = 0
        self._started = time.monotonic()
        self._lock = threading.Lock()

    def _line(self, text: str, finishes: bool = False) -> None:
        with self._lock:
            self.finished += finishes
            if self.enabled:
                # One write per line: print() writes the text and the newline separately, and a step's
                # echoed output (fray's LocalCluster) could land between them.
                sys.stderr.write(f"[{self.finished:>{len(str(self.total))}}/{self.total}] {text}\n")
                sys.stderr.flush()

    def note(self, text: str) -> None:
        """A line that does not finish a step (started, waiting)."""
        if self.enabled:
            self._line(text)

    def step_done(
        self, outcome: RunOutcome, name: str, seconds: float | None = None, detail: str = ""
    ) -> None:
        """A step reached an end state (succeeded, reused, failed, interrupted, blocked), shown by
        `OUTCOME_LABELS`."""
        if not self.enabled:
            with self._lock:
                self.finished += 1
            return
        took = f" ({seconds:.2f}s)" if seconds is not None else ""
        self._line(
            f"{OUTCOME_LABELS[outcome]:<9} {name}{took}{'  ' + detail if detail else ''}", finishes=True
        )

    def elapsed(self) -> float:
        """Seconds since the run started."""
        return time.monotonic() - self._started
