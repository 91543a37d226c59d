"""Test ports (tests/ports.py): never one port for two test processes, and a test that needs a fixed
port waits for it instead of skipping."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from ports import HIGH, LOW, fixed_ports, free_port

CLAIM = (
    "import sys; sys.path.insert(0, sys.argv[1]); from ports import free_port; "
    "print([free_port() for _ in range(300)], flush=True); sys.stdin.read()"
)


def test_two_processes_are_never_handed_the_same_port():
    other = subprocess.Popen(
        [sys.executable, "-c", CLAIM, str(Path(__file__).parent)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        theirs = set(eval(other.stdout.readline()))  # they hold their claims until they exit
        mine = {free_port() for _ in range(300)}
    finally:
        other.communicate("")
    assert len(theirs) == len(mine) == 300 and not theirs & mine
    assert all(LOW <= port < HIGH for port in mine | theirs)


def test_a_fixed_port_is_waited_for_until_its_holder_lets_go():
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    port = free_port()
    holder.bind(("127.0.0.1", port))
    holder.listen()
    threading.Timer(1.5, holder.close).start()
    started = time.monotonic()
    with fixed_ports(port, timeout=60):
        waited = time.monotonic() - started
        with socket.socket() as server:
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind(("127.0.0.1", port))  # ours now
    assert waited >= 1.0
