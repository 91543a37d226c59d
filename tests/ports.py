"""TCP ports for the servers tests start, safe when several test processes run at once.

`free_port()` hands out ports from a range the kernel never gives away by itself (below its ephemeral
range, above Ray's worker ports), each claimed by an exclusive lock file that this process holds for
as long as it lives. A port is therefore never handed to two test processes of this machine (two
pytest-xdist workers, or two checkouts' suites), and nothing binding port 0 can take it between the
check and the server's own bind: no check-then-bind race.

`fixed_ports(...)` is for the commands whose ports are fixed by the docs (Ray's 6379/8265, Marina's
8642/8643): one machine-wide lock, then a wait until the ports are free. A test waits its turn; it
never skips because a port is busy.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import socket
import tempfile
import time
from collections.abc import Iterator

# Linux's ephemeral ports start at 32768 (/proc/sys/net/ipv4/ip_local_port_range) and Ray's workers take
# 10002-19999 (`ray start --min-worker-port` / `--max-worker-port` defaults): neither hands these out.
LOW, HIGH = 20000, 32700
LOCKS = os.path.join(tempfile.gettempdir(), f"marin-test-ports-{os.getuid()}")
# The lock every test takes before it binds a fixed port; a machine whose other users of those ports
# share a lock file of their own (`flock FILE command`) names it here.
FIXED_LOCK = os.environ.get("MARIN_TEST_FIXED_PORTS_LOCK") or os.path.join(LOCKS, "fixed.lock")

_claimed: dict[int, int] = {}  # port -> the fd of its lock file, held until this process exits


def _bindable(port: int, reuse: bool = False) -> bool:
    with socket.socket() as s:
        if reuse:  # as servers bind: a port whose last connection is in TIME_WAIT is free to them
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _claim(port: int) -> bool:
    os.makedirs(LOCKS, exist_ok=True)
    fd = os.open(os.path.join(LOCKS, f"{port}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False
    _claimed[port] = fd
    return True


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on and that no other test process will be given."""
    span = HIGH - LOW
    start = random.randrange(span)
    for offset in range(span):
        port = LOW + (start + offset) % span
        if port in _claimed or not _claim(port):
            continue
        if _bindable(port):
            return port
        # something outside the tests holds it: keep the claim, so no one tries it again
    raise RuntimeError(f"no free port between {LOW} and {HIGH}")


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def fixed_ports(*ports: int, timeout: float = 900) -> Iterator[None]:
    """Hold the machine's lock on fixed ports, then wait until nothing listens on `ports` or can't
    bind them; released when the block ends. A port still busy after `timeout` seconds is an error."""
    os.makedirs(os.path.dirname(FIXED_LOCK), exist_ok=True)
    with open(FIXED_LOCK, "a") as lock:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"another test held the fixed ports {ports} for {timeout:g} s"
                    ) from None
                time.sleep(0.5)
        busy = list(ports)
        while busy := [p for p in busy if _listening(p) or not _bindable(p, reuse=True)]:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"ports {busy} stayed busy for {timeout:g} s (what holds them is no test's)"
                )
            time.sleep(0.5)
        yield
