"""Exception types of the execution engine. Each message names the step and says what to do."""

from __future__ import annotations


class MarinError(Exception):
    """Base class of every error marin raises on purpose."""


class StepDefinitionError(MarinError, ValueError):
    """A step is declared wrongly: bad name, path, hash_attrs or dependency."""


class DagError(MarinError):
    """The step graph is invalid: a cycle, or two steps that claim one output path."""


class StepFailedError(MarinError):
    """One or more steps failed during a run. `failures` maps step name -> formatted error."""

    def __init__(self, failures: dict[str, str], blocked: list[str] | None = None):
        self.failures = dict(failures)
        self.blocked = list(blocked or [])
        lines = [f"{len(self.failures)} step(s) failed:"]
        for name, message in self.failures.items():
            lines.append(f"--- {name}\n{message}")
        if self.blocked:
            lines.append(f"{len(self.blocked)} step(s) blocked by those failures: {', '.join(self.blocked)}")
        super().__init__("\n".join(lines))


class LeaseLostError(MarinError):
    """The running step no longer holds the lease on its output path; it must stop without completing."""
