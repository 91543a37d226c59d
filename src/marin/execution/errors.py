"""Exception types of the execution engine. Each message names the step and says what to do."""

from __future__ import annotations

import re
import sys

from fray.cluster import FrayError


class MarinError(Exception):
    """Base class of every error marin raises on purpose."""


class StepDefinitionError(MarinError, ValueError):
    """A step is declared wrongly: bad name, path, hash_attrs or dependency."""


class DagError(MarinError):
    """The step graph is invalid: a cycle, or two steps that claim one output path."""


class StepFailedError(MarinError):
    """One or more steps failed during a run. `failures` maps step name -> its formatted error, whose
    first line is the error itself (`error_line`) and the rest where to read more and the traceback.

    The message is one line per failed step (the first `SHOWN` of them), naming the rest and the
    steps they blocked; `reported` is True when every failure was an error raised on purpose with a
    message for the user (`is_reported`: bad input), not a bug.
    """

    SHOWN = 5

    def __init__(self, failures: dict[str, str], blocked: list[str] | None = None, reported: bool = False):
        self.failures = dict(failures)
        self.blocked = list(blocked or [])
        self.reported = reported
        lines = []
        for name, error, log in self.shown():
            lines.append(f"step {name!r} failed: {error}" + (f" (log: {log})" if log else ""))
        lines += self.rest()
        super().__init__("\n".join(lines))

    def shown(self) -> list[tuple[str, str, str | None]]:
        """(step, its error line, its log when the line does not name it) of the first SHOWN failures."""
        out = []
        for name, text in list(self.failures.items())[: self.SHOWN]:
            error = first_line(text)
            log = _LOG.search(text)
            out.append((name, error, log.group(1) if log and log.group(1) not in error else None))
        return out

    def rest(self) -> list[str]:
        """The lines after the shown failures: how many more failed, and which steps they blocked."""
        lines = []
        more = list(self.failures)[self.SHOWN :]
        if more:
            lines.append(f"and {len(more)} more failed: {_names(more)} (see each step's .executor_log)")
        if self.blocked:
            lines.append(f"{len(self.blocked)} step(s) blocked by those failures: {_names(self.blocked)}")
        return lines


_LOG = re.compile(r"log: (\S+?\.executor_log)")


def first_line(text: str) -> str:
    """The first non-blank line of a message."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def is_reported(error: BaseException) -> bool:
    """Whether `error` was raised on purpose with a message for the user: a MarinError, a FrayError
    (a resource request, a cluster's refusal) or a ZephyrError (fray and zephyr are libraries
    below marin, with their own bases; zephyr is looked up only when loaded, since the engine never
    imports it)."""
    if isinstance(error, MarinError | FrayError):
        return True
    zephyr_errors = sys.modules.get("zephyr.errors")
    return zephyr_errors is not None and isinstance(error, zephyr_errors.ZephyrError)


def error_line(error: BaseException) -> str:
    """The error as one line: its message when raised on purpose (`is_reported`), else its type and
    message (`ValueError: cannot handle document 17`)."""
    message = first_line(str(error))
    if is_reported(error) and message:
        return message
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


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
