"""Backends place shard tasks: in-process (`sync`), a local process pool (`processes`) or Ray (`ray`)."""

from __future__ import annotations

from zephyr.backends.base import Backend
from zephyr.config import ZephyrConfig


def make_backend(config: ZephyrConfig, num_tasks: int) -> Backend:
    """The backend the config names; Ray is imported only when it is asked for."""
    if config.backend == "sync":
        from zephyr.backends.sync import SyncBackend

        return SyncBackend()
    if config.backend == "processes":
        from zephyr.backends.processes import ProcessBackend

        return ProcessBackend(min(config.worker_count(), max(1, num_tasks)), config.start_method)
    from zephyr.backends.ray_backend import RayBackend

    return RayBackend(config.ray_address)


__all__ = ["Backend", "make_backend"]
