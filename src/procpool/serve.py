"""The worker side: answer the requests that arrive on a connection until it closes.

`python -m procpool.serve FD HANDLER SETUP PARENT` serves over the connected socket FD (how an "exec"
worker starts: a fresh interpreter that imports only this module, the handler's and the setup's;
SETUP may be empty) and dies with the process PARENT (`procpool.lifeline`).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from multiprocessing.connection import Connection

from procpool.lifeline import die_with_parent


def resolve(name: str) -> Callable:
    """The function that `module:function` names."""
    module, _, function = name.partition(":")
    return getattr(importlib.import_module(module), function)


def serve(conn: Connection, handler: str, setup: str | None = None, parent: int | None = None) -> None:
    """Call `setup()` once, then reply to each request with `handler(request)`, until the connection
    closes or an empty request says stop (a forked worker may hold a copy of the parent's end, so
    closing that end alone does not reach it). The process dies with `parent` (None: its parent
    now) at once, whatever its handler is doing."""
    die_with_parent(parent)
    if setup:
        resolve(setup)()
    handle = resolve(handler)
    while True:
        try:
            request = conn.recv_bytes()
        except (EOFError, OSError):
            return
        if not request:
            return
        conn.send_bytes(handle(request))


if __name__ == "__main__":
    fd = int(sys.argv[1])
    os.set_inheritable(fd, False)  # a task's own subprocesses must not hold the socket open
    try:
        serve(Connection(fd), sys.argv[2], sys.argv[3] or None, int(sys.argv[4]))
    except KeyboardInterrupt:  # Ctrl-C in the terminal reaches the whole process group: end quietly
        sys.exit(130)
