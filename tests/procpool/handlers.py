"""Request handlers for the procpool tests' workers (importable by name in a fresh interpreter)."""

from __future__ import annotations

import os
import time

STARTED = []


def mark_started() -> None:
    STARTED.append(os.getpid())


def echo_pid(request: bytes) -> bytes:
    """The request, followed by this worker's pid and whether setup ran here."""
    return request + f" {os.getpid()} {STARTED == [os.getpid()]}".encode()


def obey(request: bytes) -> bytes:
    """b'die' exits the process at once; b'sleep' sleeps a minute; anything else comes back."""
    if request == b"die":
        os._exit(7)
    if request == b"sleep":
        time.sleep(60)
    return request
