"""Stopping running Ray tasks, gently first: what `RayCluster.cancel` does to a task or a gang's replicas."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any


def stop_tasks(ray: Any, refs: Sequence[Any], grace_s: float, settled: Callable[[], bool]) -> None:
    """Stop the Ray tasks of `refs`: with `grace_s` > 0, `ray.cancel` raises KeyboardInterrupt in each
    (what a Ctrl-C does: a training finishes its step and writes its checkpoint), and any still
    running `grace_s` seconds later, unless `settled()` by then, has its worker killed; with 0, they
    are killed at once. Returns at once."""
    if grace_s <= 0:
        for ref in refs:
            ray.cancel(ref, force=True)  # a no-op should the task settle meanwhile
        return
    for ref in refs:
        ray.cancel(ref, force=False)

    def kill() -> None:
        if not settled():
            for ref in refs:
                ray.cancel(ref, force=True)

    timer = threading.Timer(grace_s, kill)
    timer.daemon = True
    timer.start()
