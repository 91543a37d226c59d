"""The `ray` backend: each shard task is a Ray task on the current cluster.

The cluster is the one already initialised in this process, else the one at the configured
address or RAY_ADDRESS, else a new local one. Ray's own retries are off: zephyr's retry loop
re-submits failed shards the same way on every backend.

zephyr is a leaf library, so it connects to Ray itself rather than through fray. It connects the way
fray's RayCluster does (token authentication, the driver's own code on the workers' import path), so
whichever of the two connects a process first, the other finds a connection that serves it.
"""

from __future__ import annotations

import os
import sys

from zephyr.backends.base import Backend
from zephyr.worker import ShardResult, TaskFailure, run_payload


class RayBackend(Backend):
    """Submits up to twice the cluster's CPUs of shard tasks at a time and collects them as they finish."""

    def __init__(self, address: str | None = None):
        import ray

        self._ray = ray
        connect(address)
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


def connect(address: str | None = None) -> bool:
    """Connect this process to Ray unless it already is: `address`, else RAY_ADDRESS, else a new local
    Ray. Returns whether it connected now."""
    import ray

    if ray.is_initialized():
        return False
    _use_auth_token_if_available()
    ray.init(
        address=address or os.environ.get("RAY_ADDRESS") or None,
        log_to_driver=True,
        configure_logging=False,
        # Workers must import what the driver imports from outside the environment (the pipeline's
        # module in the user's directory): pickles name such functions by module.
        job_config=ray.job_config.JobConfig(code_search_path=_user_code_paths()),
    )
    return True


def _use_auth_token_if_available() -> None:
    """Turn Ray's token mode on when a token exists and RAY_AUTH_MODE is unset.

    A Ray >= 2.5x head started where a token exists (~/.ray/auth_token, left by any local ray.init)
    demands it, yet a client connecting to an explicit address sends it only in token mode.
    """
    if os.environ.get("RAY_AUTH_MODE") is not None:
        return
    from ray._raylet import AuthenticationTokenLoader, Config

    if AuthenticationTokenLoader.instance().has_token(ignore_auth_mode=True):
        os.environ["RAY_AUTH_MODE"] = "token"
        Config.initialize("")  # ray read the mode when it was imported: make this process see it now


def _user_code_paths() -> list[str]:
    """The driver's import path entries that are not part of the Python installation itself."""
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    paths = []
    for entry in sys.path:
        real = os.path.realpath(entry or os.getcwd())
        if os.path.isdir(real) and not any(real == p or real.startswith(p + os.sep) for p in prefixes):
            paths.append(real)
    return list(dict.fromkeys(paths))
