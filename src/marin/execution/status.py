"""A step output's status record, `.executor_status`.

It holds the step's current state, its name, its key, and the history of events (state, time, host,
pid, and per kind: the key and dependency paths of a start, the error of a failure, a preemption).
Only the lease holder writes it (see `marin.execution.lease`), always atomically, and SUCCESS is the
last thing a run writes. On disk:

    {"state": "SUCCESS", "name": "tokenize", "key": "3f2a...",
     "events": [{"state": "RUNNING", "time": 1.7e9, "host": "h", "pid": 42, "key": "3f2a...", "deps": []},
                {"state": "SUCCESS", "time": 1.7e9, "host": "h", "pid": 42}]}
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

import msgspec

import storage
from marin.execution.records import JsonRecord, read_typed
from marin.execution.states import StepState

STATUS_FILE = ".executor_status"
DEFAULT_MAX_ATTEMPTS = 3  # lost attempts of one key before the step is blocked (see lost_attempts)

HOST = socket.gethostname()


class Event(msgspec.Struct, frozen=True, omit_defaults=True):
    """One entry of a status's history; the optional fields are written only when set."""

    state: StepState
    time: float
    host: str
    pid: int
    key: str | None = None  # a start: the key it runs under
    attempt: int | None = None  # a start: 1 + the attempts of this key lost before it (see lost_attempts)
    deps: tuple[str, ...] | None = None  # a start: its dependencies' output paths (for `marin gc`)
    error: str | None = None  # a failure, a loss or an interrupt: why
    preempted: dict[str, Any] | None = None  # a gang restart: the lost replica and its node
    adopted: bool = False  # an `adopt=True` step took the folder as its output


class StatusRecord(JsonRecord, frozen=True):
    """The parsed `.executor_status`: the state is that of the last event."""

    state: StepState
    name: str
    key: str
    events: tuple[Event, ...] = ()

    def to_bytes(self) -> bytes:
        """The record as its file holds it: compact JSON."""
        return _ENCODER.encode(self)

    @property
    def last(self) -> Event | None:
        """The latest event, or None when the history is empty."""
        return self.events[-1] if self.events else None


_ENCODER = msgspec.json.Encoder()


def is_status_temp(name: str) -> bool:
    """Whether a file name is a status being written (its temporary, renamed into place when whole)."""
    return name.startswith(f"{STATUS_FILE}.tmp-")


def event(state: StepState, **extra: Any) -> Event:
    """A status event stamped with this host, this process and the time."""
    return Event(state, time.time(), HOST, os.getpid(), **extra)


def read_status(output_path: str, strict: bool = False) -> StatusRecord | None:
    """The `.executor_status` of an output, or None when it has none.

    An unreadable one (empty, garbled, not a status record, not a regular file, too large) reads as
    None, or with `strict` raises UnreadableRecordError naming it.
    """
    return read_typed(f"{output_path}/{STATUS_FILE}", StatusRecord, strict)


def write_status(output_path: str, name: str, key: str, events: list[Event]) -> None:
    """Atomically write the status: the state is that of the last event."""
    record = StatusRecord(events[-1].state, name, key, tuple(events))
    storage.write_atomic(f"{output_path}/{STATUS_FILE}", record.to_bytes())


def lost_attempts(status: StatusRecord | None, key: str) -> int:
    """How many attempts under `key` were lost since the step last succeeded or failed under it: those
    that ended LOST, and starts followed by another start with no end between (their runner died).

    A last start with no end yet is not counted: it may still be running. A caller that knows its
    runner is gone (no live lease) adds it. Interrupted attempts are never counted: the runner was
    told to stop.
    """
    if status is None:
        return 0
    lost, open_start, current = 0, False, None
    for e in status.events:
        if e.state == StepState.RUNNING:
            if e.preempted is not None:  # a gang restarting inside one attempt
                continue
            if open_start and current == key:
                lost += 1
            if e.key != current:
                lost = 0
            current, open_start = e.key, True
        elif e.state == StepState.LOST:
            lost += current == key
            open_start = False
        elif e.state in (StepState.SUCCESS, StepState.FAILED):
            lost, open_start = 0, False
            current = e.key or current  # an adopted SUCCESS carries its key
        else:
            open_start = False
    return lost if current == key else 0
