"""Stopping what tests started: by pid, never by name (other suites may run on the same machine)."""

from __future__ import annotations

import psutil


def kill_all(procs: list[psutil.Process], timeout: float = 30) -> None:
    """SIGKILL each of `procs` and wait up to `timeout` seconds for all of them to exit."""
    for proc in procs:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=timeout)
