"""Echo a running task's log to the terminal: each new line, prefixed with the task's name.

Only whole lines are written, each in one write under one lock, so lines of tasks running side by
side never interleave. A progress bar that redraws itself with carriage returns (tqdm) shows its
latest state at most once per `update_interval_s` per task, and its final state when its line ends.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import BinaryIO, TextIO

_WRITE_LOCK = threading.Lock()


class LogEcho:
    """Follows the local file `path` from byte `start` (default: its current end); `pump()` writes
    what was appended since. The file is opened only once it has grown past `start`: most tasks
    write nothing, and one stat then replaces an open, seeks, a read and a close."""

    def __init__(
        self,
        path: str,
        name: str,
        *,
        update_interval_s: float = 1.0,
        out: TextIO | None = None,
        show_name: bool = True,
        start: int | None = None,
    ):
        """`out`: where lines go (default: sys.stderr at each write); `show_name`: prefix them with
        `[name] ` (a Ray driver prefixes forwarded lines with the task's name itself)."""
        self.name = name
        self.out = out
        self.show_name = show_name
        self.update_interval_s = update_interval_s
        self.path = path
        self._start = os.stat(path).st_size if start is None else start
        self._file: BinaryIO | None = None
        self._partial = b""
        self._last_update = float("-inf")

    def pump(self, *, final: bool = False) -> None:
        """Write the lines appended since the last call; with `final`, also the unfinished last line."""
        if self._file is None:
            try:
                size = os.stat(self.path).st_size
            except FileNotFoundError:
                return  # not created yet: the task's process opens it as it starts the task
            if size <= self._start:
                return  # nothing appended: not even an unfinished line to show
            self._file = open(self.path, "rb")  # noqa: SIM115 - closed by close()
            self._file.seek(self._start)
        data = self._file.read()
        if not data and not final:
            return
        *lines, self._partial = (self._partial + data).split(b"\n")
        shown = [_latest(line.split(b"\r")) for line in lines]
        if b"\r" in self._partial:  # a progress bar redrawing one line: its complete states so far
            *redraws, self._partial = self._partial.split(b"\r")
            now = time.monotonic()
            if now - self._last_update >= self.update_interval_s and _latest(redraws):
                shown.append(_latest(redraws))
                self._last_update = now
        if final and self._partial.strip():
            shown.append(self._partial)
            self._partial = b""
        self._write([text for text in shown if text.strip()])

    def close(self) -> None:
        """Write what is left (the unfinished last line too) and stop following the file."""
        self.pump(final=True)
        if self._file is not None:
            self._file.close()

    def _write(self, lines: list[bytes]) -> None:
        if not lines:
            return
        prefix = f"[{self.name}] " if self.show_name else ""
        text = "".join(prefix + line.decode("utf-8", "replace").rstrip() + "\n" for line in lines)
        out = self.out or sys.stderr
        with _WRITE_LOCK:
            out.write(text)
            out.flush()


def _latest(segments: list[bytes]) -> bytes:
    """The last non-blank of the carriage-return separated states of one line."""
    for segment in reversed(segments):
        if segment.strip():
            return segment
    return b""
