"""ResourceConfig.regions and preemptible: node-label placement on the session's real Ray cluster
(head in us-east1, on-demand; worker in us-central1, spot: tests/ray_nodes.py), ignored with one
warning on a LocalCluster."""

from __future__ import annotations

import concurrent.futures
import functools
import time
import warnings
from pathlib import Path

import pytest

from fray.cluster import LocalCluster, PlacementIgnoredWarning, ResourceConfig, ResourcesUnavailableError
from fray.cluster.placement import (
    MARKET_TYPE_LABEL,
    REGION_LABEL,
    label_selector,
    selector_matches,
    why_no_node_is_allowed,
)
from fray.cluster.ray_cluster import ray_options

pytestmark = pytest.mark.timeout(180)

SPOT_US_CENTRAL = {REGION_LABEL: "us-central1", MARKET_TYPE_LABEL: "spot"}
UNLABELLED: dict[str, str] = {}


def _node_id() -> str:
    import ray

    return ray.get_runtime_context().get_node_id()


def _hold_until_released(work_dir: str) -> str:
    """Holds its CPU until the test creates `release` in `work_dir`; returns its node id."""
    work = Path(work_dir)
    (work / "running").touch()
    deadline = time.monotonic() + 120
    while not (work / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return _node_id()


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + 120
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def _node_ids_by_region() -> dict[str, str]:
    import ray

    return {n["Labels"][REGION_LABEL]: n["NodeID"] for n in ray.nodes() if n.get("Alive")}


def test_selectors_follow_regions_and_preemptible():
    assert label_selector(ResourceConfig()) == {}
    assert label_selector(ResourceConfig(regions=["us-central1"])) == {REGION_LABEL: "us-central1"}
    assert label_selector(ResourceConfig(regions=("us-central1", "europe-west4"), preemptible=False)) == {
        REGION_LABEL: "in(us-central1,europe-west4)",
        MARKET_TYPE_LABEL: "!in(spot,preemptible)",
    }
    assert ray_options(ResourceConfig.with_cpu(2, regions=["us-east1"])) == {
        "num_cpus": 2.0,
        "label_selector": {REGION_LABEL: "us-east1"},
    }


def test_label_keys_are_rays_own():
    import ray._raylet

    assert REGION_LABEL == ray._raylet.RAY_NODE_REGION_KEY
    assert MARKET_TYPE_LABEL == ray._raylet.RAY_NODE_MARKET_TYPE_KEY


def test_selectors_match_nodes_as_rays_scheduler_does():
    on_demand = label_selector(ResourceConfig(preemptible=False))
    assert not selector_matches(on_demand, SPOT_US_CENTRAL)
    assert selector_matches(on_demand, UNLABELLED)  # an unlabelled node is not preemptible
    assert selector_matches(on_demand, {MARKET_TYPE_LABEL: "on-demand"})
    either = label_selector(ResourceConfig(regions=("us-east1", "us-central1")))
    assert selector_matches(either, SPOT_US_CENTRAL)
    assert not selector_matches(either, UNLABELLED)  # an unlabelled node is in no region
    assert not selector_matches(label_selector(ResourceConfig(regions=["us-east1"])), SPOT_US_CENTRAL)


def test_why_no_node_is_allowed_names_what_was_asked_and_what_the_cluster_has():
    nodes = [SPOT_US_CENTRAL, {REGION_LABEL: "us-east1"}, UNLABELLED]
    assert why_no_node_is_allowed(ResourceConfig(regions=["us-east1"], preemptible=False), nodes) is None
    message = why_no_node_is_allowed(ResourceConfig(regions=["asia-east1"]), nodes)
    assert "regions=('asia-east1',)" in message and "the cluster's regions: us-central1, us-east1" in message
    message = why_no_node_is_allowed(ResourceConfig(regions=["us-central1"], preemptible=False), nodes)
    assert "preemptible=False and every node in regions us-central1 is preemptible" in message


def test_bad_region_names_are_rejected_at_declaration():
    from fray.cluster import ResourceConfigError

    with pytest.raises(ResourceConfigError, match=r"regions has 'us central1', which is not a region name"):
        ResourceConfig(regions=["us central1"])


def _run_in(cluster, region: str, name: str):
    return cluster.submit(_node_id, name=name, resources=ResourceConfig(regions=[region]))


def test_task_asking_for_a_region_runs_on_a_node_in_that_region(ray_cluster, ray_nodes):
    by_region = _node_ids_by_region()
    central = ray_nodes.worker_labels[REGION_LABEL]
    east = ray_nodes.head_labels[REGION_LABEL]
    futures = [
        (region, _run_in(ray_cluster, region, f"in-{region}-{i}"))
        for i in range(3)
        for region in (central, east)
    ]
    assert [(region, f.result(timeout=120)) for region, f in futures] == [
        (region, by_region[region]) for region, _ in futures
    ]


def test_non_preemptible_task_waits_for_an_on_demand_node_rather_than_run_on_a_spot_one(
    ray_cluster, ray_nodes, tmp_path
):
    by_region = _node_ids_by_region()
    head_region = ray_nodes.head_labels[REGION_LABEL]
    head, spot_worker = by_region[head_region], by_region[ray_nodes.worker_labels[REGION_LABEL]]
    # Fill the only on-demand node (the head, 1 CPU), so that the spot worker is the only free one.
    blocker = ray_cluster.submit(
        functools.partial(_hold_until_released, str(tmp_path)),
        name="blocker",
        resources=ResourceConfig(regions=[head_region]),
    )
    try:
        _wait_for(tmp_path / "running")
        on_demand = ResourceConfig(preemptible=False)
        futures = [ray_cluster.submit(_node_id, name=f"on-demand-{i}", resources=on_demand) for i in range(2)]
        done, _ = concurrent.futures.wait(futures, timeout=1)
        assert not done  # queued for the head, although the spot worker is idle
    finally:
        (tmp_path / "release").touch()
    assert blocker.result(timeout=120) == head
    landed = {f.result(timeout=120) for f in futures}
    assert landed == {head} and spot_worker not in landed


def test_unknown_region_fails_at_once_naming_the_clusters_regions(ray_cluster, ray_nodes):
    future = ray_cluster.submit(_node_id, name="far", resources=ResourceConfig(regions=["mars-north1"]))
    assert future.done()
    with pytest.raises(ResourcesUnavailableError) as raised:
        future.result()
    message = str(raised.value)
    assert message.startswith(
        "task 'far' cannot run on this Ray cluster: it asks for regions=('mars-north1',) "
    )
    assert "the cluster's regions: us-central1, us-east1" in message


def test_region_of_only_preemptible_nodes_fails_at_once_for_a_non_preemptible_task(ray_cluster):
    resources = ResourceConfig(regions=["us-central1"], preemptible=False)
    future = ray_cluster.submit(_node_id, name="careful", resources=resources)
    with pytest.raises(
        ResourcesUnavailableError, match="preemptible=False and every node in regions us-central1"
    ):
        future.result(timeout=1)


def test_region_and_resources_must_meet_on_one_node(ray_cluster):
    # The cluster has 1-CPU nodes and a us-central1 node, but no 2-CPU node there.
    wide = ResourceConfig.with_cpu(2, regions=["us-central1"])
    future = ray_cluster.submit(_node_id, name="wide", resources=wide)
    with pytest.raises(ResourcesUnavailableError, match=r"CPU=2 and no node \(in us-central1\) has that"):
        future.result(timeout=1)


def _answer() -> int:
    return 42


def test_local_cluster_ignores_regions_with_one_warning(tmp_path):
    cluster = LocalCluster(cpu=1)
    try:
        resources = ResourceConfig(regions=["us-central1"], preemptible=False)
        ignored = r"LocalCluster ignores regions=\('us-central1',\) of task 'a'"
        with pytest.warns(PlacementIgnoredWarning, match=ignored):
            first = cluster.submit(_answer, name="a", resources=resources)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            second = cluster.submit(_answer, name="b", resources=resources)
        assert first.result(timeout=120) == second.result(timeout=120) == 42
    finally:
        cluster.shutdown()
