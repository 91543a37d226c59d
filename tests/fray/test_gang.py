"""Multi-host steps: ResourceConfig(replicas=R) runs as R processes forming one torch.distributed group."""

from __future__ import annotations

import functools
import os

import pytest

from fray.cluster import LocalCluster, ResourceConfig

pytestmark = pytest.mark.timeout(300)


def _all_reduce_ranks(fail_rank: int | None = None) -> dict:
    """Join the gang's group (gloo), all-reduce rank+1 and gather each rank's node; rank `fail_rank` raises."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        print(f"replica {rank} of {world} joined", flush=True)
        if rank == fail_rank:
            raise ValueError(f"rank {rank} fails on purpose")
        total = torch.tensor([rank + 1.0])
        dist.all_reduce(total)
        node = os.environ.get("FRAY_TEST_NODE") or _ray_node()
        nodes = [None] * world
        dist.all_gather_object(nodes, node)
        return {
            "rank": rank,
            "world": world,
            "sum": total.item(),
            "nodes": nodes,
            "master": os.environ["MASTER_ADDR"],
            "port": int(os.environ["MASTER_PORT"]),
        }
    finally:
        dist.destroy_process_group()


def _ray_node() -> str:
    try:
        import ray

        return (
            ray.get_runtime_context().get_node_id()
            if ray.is_initialized()
            else f"pid-host-{os.uname().nodename}"
        )
    except ImportError:
        return os.uname().nodename


def test_local_gang_of_two_forms_one_group_and_returns_rank_zeros_value(tmp_path):
    cluster = LocalCluster(cpu=2)
    try:
        log = tmp_path / "gang.log"
        future = cluster.submit(
            _all_reduce_ranks,
            name="gang",
            resources=ResourceConfig.with_cpu(1, replicas=2),
            log_path=str(log),
        )
        result = future.result(timeout=240)
        assert (result["rank"], result["world"], result["sum"]) == (0, 2, 3.0)
        assert result["master"] == "127.0.0.1" and result["port"] > 0
        text = log.read_text()
        assert "replica 0 of 2 joined" in text and "replica 1 of 2 joined" in text
    finally:
        cluster.shutdown()


def test_local_gang_fails_with_the_failing_replicas_own_error_and_stops_the_others(tmp_path):
    cluster = LocalCluster(cpu=2)
    try:
        future = cluster.submit(
            functools.partial(_all_reduce_ranks, fail_rank=1),
            name="gang",
            resources=ResourceConfig.with_cpu(1, replicas=2),
        )
        with pytest.raises(ValueError, match="rank 1 fails on purpose"):
            future.result(timeout=240)
        # The gang released its two cores: a plain task runs after it.
        assert cluster.submit(functools.partial(int, "7"), name="after").result(timeout=120) == 7
    finally:
        cluster.shutdown()


def test_ray_gang_spreads_two_replicas_over_two_nodes_in_one_group(ray_cluster, tmp_path):
    log = tmp_path / "gang.log"
    future = ray_cluster.submit(
        _all_reduce_ranks, name="gang", resources=ResourceConfig.with_cpu(1, replicas=2), log_path=str(log)
    )
    result = future.result(timeout=240)
    assert (result["rank"], result["world"], result["sum"]) == (0, 2, 3.0)
    assert len(set(result["nodes"])) == 2  # SPREAD: one replica on each node
    assert "replica 0 of 2 joined" in log.read_text()
    assert "replica 1 of 2 joined" in (tmp_path / "gang.log.rank1").read_text()


def test_ray_gang_fails_with_a_replicas_error_and_frees_its_placement_group(ray_cluster):
    future = ray_cluster.submit(
        functools.partial(_all_reduce_ranks, fail_rank=1),
        name="gang",
        resources=ResourceConfig.with_cpu(1, replicas=2),
    )
    with pytest.raises(ValueError, match="rank 1 fails on purpose") as raised:
        future.result(timeout=240)
    assert any("replica rank 1 of 2 failed" in note for note in raised.value.__notes__)
    # Both nodes' CPUs are free again: another gang of two is placed and runs.
    again = ray_cluster.submit(
        _all_reduce_ranks, name="again", resources=ResourceConfig.with_cpu(1, replicas=2)
    )
    assert again.result(timeout=240)["sum"] == 3.0


def _rank1_dies_once(path: str) -> dict:
    """A gang step whose rank 1 is killed (SIGKILL, as a preempted node's worker dies) on its first attempt."""
    import signal

    marker = os.path.join(path, "rank1-died")
    if os.environ["RANK"] == "1" and not os.path.exists(marker):
        open(marker, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    return _all_reduce_ranks()


def test_a_gang_step_that_lost_a_replica_records_the_preemption_apart_from_failures(ray_cluster, tmp_path):
    import json

    from click.testing import CliRunner

    from marin.cli import main
    from marin.execution.step_runner import StepRunner
    from marin.execution.step_spec import StepSpec

    step = StepSpec(name="gang", fn=_rank1_dies_once, resources=ResourceConfig.with_cpu(1, replicas=2))
    result = StepRunner(prefix=str(tmp_path), cluster=ray_cluster, progress=False).run([step])
    out = result.output_path(step)
    assert result.results[out]["sum"] == 3.0  # the retried gang completed
    events = json.load(open(os.path.join(out, ".executor_status")))["events"]
    assert [e["state"] for e in events] == [
        "RUNNING",
        "RUNNING",
        "SUCCESS",
    ]  # no FAILED: a preemption is no failure
    preempted = events[1]["preempted"]
    assert (preempted["replica"], preempted["retry"], preempted["of"]) == (1, 1, 2)
    assert preempted["node"] and "worker or node died" in preempted["error"]
    info = CliRunner().invoke(main, ["info", out]).output
    assert f"preempted: lost replica 1 on node {preempted['node']}; retry 1 of 2" in info
    status = CliRunner().invoke(main, ["status", str(tmp_path), "--json"]).output
    [row] = [r for r in json.loads(status) if r["name"] == "gang"]
    assert row["state"] == "SUCCESS" and "preempted 1x" in row["detail"]


def _store_listens_on() -> list[str]:
    """Join a group through marin's rendezvous store; rank 0 returns the addresses its store listens on."""
    import psutil
    import torch.distributed as dist

    from marin.training.distributed import rendezvous_store

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", store=rendezvous_store(rank, world), rank=rank, world_size=world)
    try:
        port = int(os.environ["MASTER_PORT"])
        return [
            c.laddr.ip
            for c in psutil.Process().net_connections("inet")
            if c.status == psutil.CONN_LISTEN and c.laddr.port == port
        ]
    finally:
        dist.destroy_process_group()


def test_the_rendezvous_store_listens_on_the_masters_address_not_every_interface(tmp_path):
    cluster = LocalCluster(cpu=2)
    try:
        future = cluster.submit(
            _store_listens_on, name="gang", resources=ResourceConfig.with_cpu(1, replicas=2)
        )
        assert future.result(timeout=240) == [
            "127.0.0.1"
        ]  # MASTER_ADDR of a local gang; torch's default is '*'
    finally:
        cluster.shutdown()


def test_inner_processes_of_a_replica_count_their_local_ranks_on_from_the_replicas(monkeypatch):
    from fray.cluster.gang import local_rank_envs

    def ranks(envs):
        keys = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
        return [tuple(int(e[k]) for k in keys) for e in envs]

    assert ranks(local_rank_envs(2)) == [(0, 2, 0, 2), (1, 2, 1, 2)]
    # Replica 1 of a 2-replica gang on one machine (a LocalCluster's): local rank 1 of 2.
    outer = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
    for key, value in {**outer, "MASTER_ADDR": "10.0.0.2", "MASTER_PORT": "29500"}.items():
        monkeypatch.setenv(key, value)
    joined = local_rank_envs(2, join_outer_group=True)
    assert ranks(joined) == [(2, 4, 2, 4), (3, 4, 3, 4)]  # not local ranks 0 and 1: replica 0's
    assert {(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in joined} == {("10.0.0.2", "29500")}
    assert ranks(local_rank_envs(2)) == [(0, 2, 0, 2), (1, 2, 1, 2)]  # a group of its own


def _note_my_gpu(folder: str) -> None:
    """Write the GPU this process would use (torch.cuda.set_device(LOCAL_RANK)) under its global rank."""
    visible = os.environ["CUDA_VISIBLE_DEVICES"].split(",")
    with open(os.path.join(folder, f"rank{os.environ['RANK']}"), "w") as f:
        f.write(visible[int(os.environ["LOCAL_RANK"])])


def _two_processes_noting_their_gpus(folder: str) -> None:
    from fray.cluster import run_as_local_gang

    run_as_local_gang(functools.partial(_note_my_gpu, folder), 2, join_outer_group=True)


def test_two_gpu_replicas_of_two_processes_on_one_machine_use_four_different_gpus(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)  # the cluster hands out GPUs 0-3
    cluster = LocalCluster(cpu=2, gpus=4)  # no GPU needed: each process only reads its environment
    try:
        future = cluster.submit(
            functools.partial(_two_processes_noting_their_gpus, str(tmp_path)),
            name="gpu-gang",
            resources=ResourceConfig.with_gpu("auto", 2, cpu=1, replicas=2),
        )
        future.result(timeout=240)
    finally:
        cluster.shutdown()
    gpus = {rank: (tmp_path / f"rank{rank}").read_text() for rank in range(4)}
    assert sorted(gpus.values()) == ["0", "1", "2", "3"], gpus  # before: ranks 2 and 3 reused 0 and 1


PLACING_DRIVER = """
import functools, json, os, sys, time
from pathlib import Path

import ray

from fray.cluster import RayCluster, ResourceConfig


def note_node(folder):
    import ray

    Path(folder, os.environ["RANK"]).write_text(ray.get_runtime_context().get_node_id())


address, folder = sys.argv[1:3]
cluster = RayCluster(address=address, max_retries=0)
nodes = {}
for placement in ("PACK", "SPREAD"):
    # Both are best effort: each is placed only once the last gang's CPUs are all free again.
    while ray.available_resources().get("CPU", 0) < ray.cluster_resources()["CPU"]:
        time.sleep(0.1)
    where = os.path.join(folder, placement)
    os.makedirs(where)
    resources = ResourceConfig.with_cpu(0.5, replicas=2, gang_placement=placement)
    cluster.submit(functools.partial(note_node, where), name=placement, resources=resources).result(timeout=240)
    nodes[placement] = len({Path(where, rank).read_text() for rank in ("0", "1")})
print(json.dumps(nodes))
"""


def test_a_packed_gang_shares_a_node_that_holds_both_replicas_where_a_spread_one_does_not(
    ray_nodes, tmp_path
):
    import json
    import subprocess
    import sys

    # The session's two nodes of 1 CPU: each could hold both half-CPU replicas, so only the strategy
    # tells them apart. Its own driver process: this one may be connected to the cluster already.
    done = subprocess.run(
        [sys.executable, "-c", PLACING_DRIVER, ray_nodes.address, str(tmp_path)],
        env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"},
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [line] = [x for x in done.stdout.splitlines() if x.startswith("{")]
    assert json.loads(line) == {"SPREAD": 2, "PACK": 1}  # how many nodes the two replicas ran on
