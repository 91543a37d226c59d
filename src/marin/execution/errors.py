"""Exception types of the execution engine. Each message names the step and says what to do."""

from __future__ import annotations


class MarinError(Exception):
    """Base class of every error marin raises on purpose."""


class StepDefinitionError(MarinError, ValueError):
    """A step is declared wrongly: bad name, path, hash_attrs or dependency."""


class DagError(MarinError):
    """The step graph is invalid: a cycle, or two steps that claim one output path."""


class StepFailedError(MarinError):
    """One or more steps failed during a run. `failures` maps step name -> formatted error.

    The message shows the first `SHOWN` failures in full and names the rest (all are in `failures`).
    """

    SHOWN = 5

    def __init__(self, failures: dict[str, str], blocked: list[str] | None = None):
        self.failures = dict(failures)
        self.blocked = list(blocked or [])
        lines = [f"{len(self.failures)} step(s) failed:"]
        for name, message in list(self.failures.items())[: self.SHOWN]:
            lines.append(f"--- {name}\n{message}")
        rest = list(self.failures)[self.SHOWN :]
        if rest:
            lines.append(f"--- and {len(rest)} more failed: {_names(rest)} (see each step's .executor_log)")
        if self.blocked:
            lines.append(f"{len(self.blocked)} step(s) blocked by those failures: {_names(self.blocked)}")
        super().__init__("\n".join(lines))


def _names(names: list[str], limit: int = 50) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")


class LeaseLostError(MarinError):
    """The running step no longer holds the lease on its output path; it must stop without completing."""


class LeaseGivenUpError(MarinError):
    """The runner could not renew a step's lease for nearly `lease_timeout` (its storage kept failing),
    so it gave the lease up and stopped the step, which counts as failed; `__cause__` is the last
    storage error."""


class UnreadableRecordError(MarinError):
    """A record file (status, lease, info, artifact) is not a regular file, is too large, or cannot be
    parsed. `path` is the file; `why` says what is wrong with it."""

    def __init__(self, path: str, why: str):
        self.path = path
        self.why = why
        super().__init__(f"unreadable record {path}: {why}")


class OutputConflictError(MarinError):
    """A step's output folder holds data the engine did not write (no status of this step), so the
    runner refuses to touch it. The message names the folder and the three ways out."""

    def __init__(self, step: str, path: str, detail: str = ""):
        self.step = step
        self.path = path
        super().__init__(
            f"step {step!r}: its output folder {path} already exists, is not empty and holds no .executor_status "
            f"of step {step!r}{detail}; marin never deletes or overwrites what it did not write. "
            f"Either pass adopt=True to take the folder as this step's output, give the step another "
            f"output_path, or remove the folder by hand"
        )


class RunInterruptedError(MarinError):
    """The runner got SIGINT or SIGTERM: its running steps were cancelled and recorded INTERRUPTED."""
