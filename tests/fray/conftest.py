"""Fixtures of the fray tests: a RayCluster on the session's real two-node Ray cluster (tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ray_cluster(ray_nodes):
    """A RayCluster connected to the session's nodes through RAY_ADDRESS."""
    from fray.cluster import RayCluster

    cluster = RayCluster(max_retries=2)
    yield cluster
    cluster.shutdown()
