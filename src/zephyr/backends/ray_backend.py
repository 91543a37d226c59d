"""The `ray` backend: each shard task is a Ray task on the current cluster.

The cluster is the one already initialised in this process, else the one at the configured
address or RAY_ADDRESS, else a new local one. Ray's own retries are off: zephyr's retry loop
re-submits failed shards the same way on every backend.

zephyr is a leaf library, so it connects to Ray through the `rayconnect` leaf rather than through
fray; fray's RayCluster connects through the same function (token authentication, the driver's own
code on the workers' import path), so whichever of the two connects a process first, the other finds
a connection that serves it.
"""

from __future__ import annotations

import rayconnect
from zephyr.backends.base import Backend
from zephyr.worker import ShardResult, TaskFailure, run_payload


class RayBackend(Backend):
    """Submits up to twice the cluster's CPUs of shard tasks at a time and collects them as they finish."""

    def __init__(self, address: str | None = None):
        import ray

        self._ray = ray
        rayconnect.connect(address, log_to_driver=True)
        self._remote = ray.remote(num_cpus=1, max_retries=0)(run_payload)
        self._slots = max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
        self._in_flight: dict = {}

    def free_slots(self) -> int:
        return self._slots - len(self._in_flight)

    def submit(self, task_id: int, payload: bytes) -> None:
        self._in_flight[self._remote.remote(payload)] = task_id

    def wait(self) -> list[tuple[int, ShardResult]]:
        ready, _ = self._ray.wait(list(self._in_flight), num_returns=1)
        finished = []
        for ref in ready:
            task_id = self._in_flight.pop(ref)
            try:
                result = self._ray.get(ref)
            except self._ray.exceptions.RayError as e:  # the worker died or the task was lost
                result = ShardResult(
                    -1, -1, failure=TaskFailure(type(e).__name__, str(e).partition("\n")[0], None, None)
                )
            finished.append((task_id, result))
        return finished

    def close(self) -> None:
        for ref in self._in_flight:
            self._ray.cancel(ref, force=True)
        self._in_flight = {}
