"""Fixtures of the fray tests: one real two-node Ray cluster (a head with the dashboard, which serves
the Jobs API, and a worker, one CPU each) for the whole session, started with `ray start` and killed
by pid at the end."""

from __future__ import annotations

import os

import pytest
from ray_nodes import LocalRayCluster


@pytest.fixture(scope="session")
def ray_nodes():
    """A running head + worker node; RAY_ADDRESS points at the head while it lives."""
    import ray

    if ray.is_initialized():  # an earlier test's connection (e.g. a local Ray) is not this cluster
        ray.shutdown()
    saved = {name: os.environ.get(name) for name in ("RAY_ADDRESS", "RAY_AUTH_MODE")}
    nodes = LocalRayCluster(workers=1, cpus_per_node=1, dashboard=True).start()
    os.environ["RAY_ADDRESS"] = nodes.address
    try:
        yield nodes
    finally:
        if ray.is_initialized():
            ray.shutdown()
        nodes.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture(scope="session")
def ray_cluster(ray_nodes):
    """A RayCluster connected to the session's nodes through RAY_ADDRESS."""
    from fray.cluster import RayCluster

    cluster = RayCluster(max_retries=2)
    yield cluster
    cluster.shutdown()
