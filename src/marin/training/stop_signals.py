"""SIGTERM and SIGINT while training: finish the step, checkpoint, exit; a second signal exits at once.

A preemption notice, Ray cancelling a task, the runner's interrupt and Ctrl-C all arrive as SIGTERM
or SIGINT. `StopSignals` notes the first one (the trainer reads `received` after each step, agrees
on it over the processes, writes a checkpoint and raises `TrainingInterrupted`) and restores the
previous handlers when the run ends. A second signal of the same kind is not waited on: the process
ends by it (its default action), as a user pressing Ctrl-C twice expects. A SIGTERM after a SIGINT
is only noted: that is a runner's cancel reaching a step whose process also got the terminal's
Ctrl-C (LocalCluster sends SIGTERM, then SIGKILL after its grace period). Handlers can only be installed in
the main thread; elsewhere (a training thread of a test) signals keep their usual meaning.
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType
from typing import Any

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopSignals:
    """A context manager catching SIGTERM and SIGINT for the trainer (see the module docstring)."""

    def __init__(self) -> None:
        self.received: str | None = None  # the first signal's name, once one came
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in _SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signal.Signals(signum).name
            print(
                f"[marin.train] got {self.received}: finishing this step, then writing a checkpoint "
                "(send it again to stop at once)",
                flush=True,
            )
            return
        if self.received == "SIGINT" and signum == signal.SIGTERM:
            return  # the runner's cancel of this Ctrl-C: the checkpoint goes on (see the module docstring)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
