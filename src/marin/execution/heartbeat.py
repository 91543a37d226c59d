"""The runner's heartbeat: one thread renewing every lease the runner holds."""

from __future__ import annotations

import logging
import threading
import time

from marin.execution.errors import LeaseGivenUpError
from marin.execution.lease import Lease

logger = logging.getLogger("marin.execution")


class Heartbeat:
    """One thread that renews every lease this runner holds, every `interval` seconds.

    A renewal that raises is logged and retried at the next beat. The lease is given up (its step
    stopped and failed) only when no renewal has succeeded for `lease_timeout - interval` seconds,
    that is when the lease would go stale before the next beat and another runner could take it.
    """

    def __init__(self, interval: float, lease_timeout: float):
        self._interval = interval
        self._lease_timeout = lease_timeout
        self._last_renewed: dict[Lease, float] = {}
        self._leases: set[Lease] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, lease: Lease) -> None:
        """Start heartbeating `lease` (just acquired: its file carries a fresh heartbeat)."""
        with self._lock:
            self._leases.add(lease)
            self._last_renewed[lease] = time.time()
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="marin-heartbeat", daemon=True)
                self._thread.start()

    def discard(self, lease: Lease) -> None:
        """Stop heartbeating `lease`."""
        with self._lock:
            self._leases.discard(lease)
            self._last_renewed.pop(lease, None)

    def stop(self) -> None:
        """Stop the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            with self._lock:
                leases = list(self._leases)
            for lease in leases:
                self._beat(lease)

    def _beat(self, lease: Lease) -> None:
        # Nothing may end this thread: a dead heartbeat lets leases go stale while their steps run on.
        try:
            renewed = lease.renew()
        except Exception as exc:  # noqa: BLE001 - storage errors of any kind (OSError or not)
            with self._lock:
                last = self._last_renewed.get(lease)
            if last is None:  # discarded meanwhile
                return
            silent = time.time() - last
            logger.warning(
                "heartbeat of the lease on %s failed (none renewed for %.1fs): %r",
                lease.output_path,
                silent,
                exc,
            )
            if silent > self._lease_timeout - self._interval:
                error = LeaseGivenUpError(
                    f"step {lease.step!r}: the lease on {lease.output_path} could not be renewed for {silent:.1f}s "
                    f"(lease_timeout {self._lease_timeout:g}s), so the runner gave it up and stopped the step "
                    f"before another runner could take it over; the last storage error: {exc!r}. Fix access to "
                    "the storage; the next run retries the step (recorded LOST)"
                )
                error.__cause__ = exc
                lease.give_up(error)
        else:
            if renewed:
                with self._lock:
                    if lease in self._last_renewed:
                        self._last_renewed[lease] = time.time()
