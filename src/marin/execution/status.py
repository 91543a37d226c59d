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

HOST = socket.gethostname()


class Event(msgspec.Struct, frozen=True, omit_defaults=True):
    """One entry of a status's history; the optional fields are written only when set."""

    state: StepState
    time: float
    host: str
    pid: int
    key: str | None = None  # a start: the key it runs under
    deps: tuple[str, ...] | None = None  # a start: its dependencies' output paths (for `marin gc`)
    error: str | None = None  # a failure or an interrupt: why
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
