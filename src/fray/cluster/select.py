"""Which cluster runs the steps when the caller did not pass one: MARIN_CLUSTER, else a LocalCluster."""

from __future__ import annotations

import os

from fray.cluster.base import Cluster, ThreadCluster
from fray.cluster.errors import FrayError

ENV_VAR = "MARIN_CLUSTER"
CHOICES = "'local' (warm worker processes, the default), 'thread', 'ray' or 'ray:ADDRESS'"


def cluster_from_spec(spec: str, *, max_workers: int = 32, echo: bool = False) -> Cluster:
    """The cluster a MARIN_CLUSTER value names.

    'local': LocalCluster, each step in a worker process of this environment within this machine's
    cores, memory and GPUs (with `echo`, its output is also shown on stderr as it runs). 'thread':
    ThreadCluster, each step on a thread of this process.
    'ray': RayCluster at $RAY_ADDRESS, else a new local Ray. 'ray:ADDRESS': RayCluster at ADDRESS
    ('auto', 'HOST:6379' or 'ray://HOST:10001').
    """
    kind, _, address = spec.strip().partition(":")
    kind = kind.lower()
    if kind == "local" and not address:
        from fray.cluster.local_cluster import LocalCluster

        return LocalCluster(echo=echo)
    if kind == "thread" and not address:
        return ThreadCluster(max_workers=max_workers)
    if kind == "ray":
        from fray.cluster.ray_cluster import RayCluster

        return RayCluster(address=address or None, echo=echo)
    raise FrayError(f"{ENV_VAR}={spec!r} names no cluster; use {CHOICES}")


def cluster_from_env(prefix: str | None = None, *, max_workers: int = 32, echo: bool = False) -> Cluster:
    """The cluster named by $MARIN_CLUSTER, else the default for `prefix`.

    `echo`: a LocalCluster streams each running step's output lines to stderr (the runner passes its
    `progress` setting).

    The default is a LocalCluster, except for a `memory://` prefix: that filesystem lives inside this
    process, so its steps run on threads here (a subprocess or a Ray worker could not see it).
    """
    spec = os.environ.get(ENV_VAR, "").strip()
    in_memory = bool(prefix) and str(prefix).startswith("memory://")
    if not spec:
        return cluster_from_spec("thread" if in_memory else "local", max_workers=max_workers, echo=echo)
    cluster = cluster_from_spec(spec, max_workers=max_workers, echo=echo)
    if in_memory and not isinstance(cluster, ThreadCluster):
        cluster.shutdown()
        raise FrayError(
            f"{ENV_VAR}={spec!r} runs steps outside this process, which cannot see the in-process prefix "
            f"{prefix!r}; use a disk or object-store prefix, or {ENV_VAR}=thread"
        )
    return cluster
