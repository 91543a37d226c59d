"""The `sync` backend: tasks run one at a time in the calling process, for debugging."""

from __future__ import annotations

from collections import deque

from zephyr.backends.base import Backend
from zephyr.worker import ShardResult, run_payload


class SyncBackend(Backend):
    """Runs each task in-process when waited for. Tasks still go through pickling, like elsewhere."""

    def __init__(self) -> None:
        self._queue: deque[tuple[int, bytes]] = deque()

    def free_slots(self) -> int:
        return 1 - len(self._queue)

    def submit(self, task_id: int, payload: bytes) -> None:
        self._queue.append((task_id, payload))

    def wait(self) -> list[tuple[int, ShardResult]]:
        task_id, payload = self._queue.popleft()
        return [(task_id, run_payload(payload))]
