"""A gang on Ray: R Ray tasks placed together through a placement group, one bundle per replica.

`RayGang.start()` (on a thread of its own, so `RayCluster.submit` returns at once) waits for the
placement group, runs a probe in bundle 0 that returns that node's address and a port free there
(rank 0's rendezvous), then starts one task per replica in its bundle with the torchrun variables
set (fray.cluster.gang.rank_env). The gang's future gets rank 0's value; when any replica fails,
the others are cancelled and the future gets that replica's error. The placement group is removed
when the attempt ends. Replicas are not retried one by one (a lone restarted rank could never rejoin
its group): when a replica is lost (its worker or node died: preemption, OOM kill), the whole gang
starts again in a new placement group, on whatever nodes hold it now, up to `max_retries` times; a
training step then resumes from its latest checkpoint. An exception the task raised is not retried.
An elastic gang (`ResourceConfig(elastic=True)`) that finds no room for all its replicas within
ELASTIC_WAIT_S while the live nodes hold fewer starts with as many as they hold (at least one).
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import cloudpickle

import storage
from fray.cluster.errors import TaskCancelledError, TaskLostError
from fray.cluster.gang import (
    GRACE_S,
    environ,
    free_port,
    is_peer_loss,
    rank_env,
    replica_log,
    root_cause,
)
from fray.cluster.logs import redirect_output
from fray.cluster.ray_stop import stop_tasks
from fray.cluster.resource_config import ResourceConfig

logger = logging.getLogger("fray")


def bundle_of(options: dict[str, Any]) -> dict[str, float]:
    """The placement group bundle of one replica whose Ray task options are `options`."""
    bundle = {"CPU": float(options.get("num_cpus", 0))}
    if options.get("num_gpus"):
        bundle["GPU"] = float(options["num_gpus"])
    if options.get("memory"):
        bundle["memory"] = float(options["memory"])
    bundle.update({k: float(v) for k, v in options.get("resources", {}).items()})
    if "accelerator_type" in options:
        bundle[f"accelerator_type:{options['accelerator_type']}"] = 0.001
    return {k: v for k, v in bundle.items() if v}


def rendezvous_probe() -> tuple[str, int]:
    """Run in rank 0's bundle: this node's address and a port free on it."""
    import ray

    address = ray.util.get_node_ip_address()
    return address, free_port(address)


def run_replica(payload: bytes, name: str, log_path: str | None, env: dict[str, str], echo: bool) -> Any:
    """What one replica's Ray worker runs: the task with the torchrun variables set, output to its log."""
    task = cloudpickle.loads(payload)
    with environ(env), redirect_output(log_path, name, echo=echo):
        return task()


ELASTIC_WAIT_S = 20.0  # how long an elastic gang waits for room for all its replicas before shrinking


class _NotPlaced(Exception):
    """An elastic gang's placement group found no room in time."""


class RayGang:
    """One gang of `resources.replicas` Ray tasks; `future` resolves to rank 0's value."""

    def __init__(
        self,
        ray: Any,
        task: Callable[[], Any],
        *,
        name: str,
        resources: ResourceConfig,
        options: dict[str, Any],
        log_path: str | None,
        echo: bool,
        own_exception: Callable[[BaseException, str], BaseException],
        max_retries: int = 0,
        on_preemption: Callable[[dict[str, Any]], None] | None = None,
    ):
        self.ray, self.name, self.resources, self.options = ray, name, resources, options
        self.max_retries = max_retries
        self.log_path, self.echo, self.own_exception = log_path, echo, own_exception
        self.payload = cloudpickle.dumps(task)
        self.future: concurrent.futures.Future = concurrent.futures.Future()
        self.on_preemption = on_preemption
        self._nodes: list[str] = []  # the address of each replica's node, this attempt
        self._lock = threading.Lock()
        self._refs: list[Any] = []
        self._cancelled: str | None = None

    def start(self) -> concurrent.futures.Future:
        """Start the gang on a thread of its own; returns its future."""
        threading.Thread(target=self._run, name=f"fray-gang-{self.name}", daemon=True).start()
        return self.future

    def cancel(self, reason: str, *, grace_s: float = 0.0) -> None:
        """Stop every replica, at once or after `grace_s` (see `ray_stop.stop_tasks`), and a gang still
        waiting for its placement group."""
        with self._lock:
            self._cancelled = self._cancelled or reason or "cancelled"
            refs = list(self._refs)
        stop_tasks(self.ray, refs, grace_s, self.future.done)

    def _run(self) -> None:
        replicas = self.resources.replicas
        try:
            attempt = 0
            while True:
                try:
                    self.future.set_result(self._attempt(replicas))
                    return
                except _NotPlaced:
                    replicas = self._replicas_that_fit()  # elastic: a node is gone for good
                    self._log(
                        f"=== fray: gang {self.name!r} cannot place {self.resources.replicas} replicas now; "
                        f"elastic: continuing with {replicas} ===\n"
                    )
                except TaskLostError as lost:
                    if attempt == self.max_retries or self._is_cancelled():
                        raise
                    attempt += 1
                    replica = getattr(lost, "replica", None)
                    self._preempted(
                        {
                            "replica": replica,
                            "node": self._nodes[replica]
                            if replica is not None and replica < len(self._nodes)
                            else None,
                            "retry": attempt,
                            "of": self.max_retries,
                            "error": str(lost).splitlines()[0][:300],
                        }
                    )
                    self._log(
                        f"=== fray: gang {self.name!r} lost a replica ({str(lost).splitlines()[0][:200]}); "
                        f"starting all replicas again (retry {attempt} of {self.max_retries}) ===\n"
                    )
        except BaseException as exc:  # noqa: BLE001 - every outcome must resolve the future
            if self._cancelled is not None and not isinstance(exc, TaskCancelledError):
                exc = TaskCancelledError(
                    f"task {self.name!r} was cancelled ({self._cancelled}): its Ray tasks were stopped"
                )
            self.future.set_exception(exc)

    def _preempted(self, record: dict[str, Any]) -> None:
        """Report a lost replica that restarts the gang to the submitter's `on_preemption`."""
        if self.on_preemption is not None:
            try:
                self.on_preemption(record)
            except Exception:  # noqa: BLE001 - the submitter's bookkeeping must not stop the gang
                logger.exception("on_preemption of gang %r failed", self.name)

    def _replicas_that_fit(self) -> int:
        """How many replicas (1 to R) the cluster's live nodes hold now."""
        need = bundle_of(self.options)
        nodes = [n["Resources"] for n in self.ray.nodes() if n.get("Alive")]
        held = sum(
            min((int(node.get(k, 0) // v + 1e-9) for k, v in need.items() if v), default=0) for node in nodes
        )
        return max(1, min(self.resources.replicas, held))

    def _log(self, line: str) -> None:
        """A line in the step's log (a local one; a remote log is rewritten by each attempt's upload)."""
        if self.log_path and storage.is_local(self.log_path):
            with open(self.log_path.removeprefix("file://"), "a") as log:
                log.write(line)

    def _attempt(self, replicas: int) -> Any:
        """Place `replicas` replicas, start them, and return rank 0's value (or raise the root cause).
        An elastic gang that cannot be placed within ELASTIC_WAIT_S raises _NotPlaced."""
        from ray.util.placement_group import placement_group, remove_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        ray = self.ray
        selector = self.options.get("label_selector")
        pg = placement_group(
            [bundle_of(self.options)] * replicas,
            strategy=str(self.resources.gang_placement),
            name=f"fray-gang-{self.name}",
            bundle_label_selector=[selector] * replicas if selector else None,
        )
        try:
            waiting_since = time.monotonic()
            while not self._is_cancelled():
                ready, _ = ray.wait([pg.ready()], timeout=1.0)
                if ready:
                    break
                if (
                    self.resources.elastic
                    and replicas > 1
                    and time.monotonic() - waiting_since > ELASTIC_WAIT_S
                    and self._replicas_that_fit() < replicas
                ):
                    raise _NotPlaced()
            if self._is_cancelled():
                raise TaskCancelledError(
                    f"task {self.name!r} was cancelled ({self._cancelled}) before its gang was placed"
                )

            def strategy(bundle: int) -> PlacementGroupSchedulingStrategy:
                return PlacementGroupSchedulingStrategy(
                    placement_group=pg, placement_group_bundle_index=bundle
                )

            self._nodes = self._bundle_nodes(pg)
            probe = ray.remote(rendezvous_probe).options(num_cpus=0, scheduling_strategy=strategy(0))
            address, port = ray.get(probe.remote())
            task_options = {k: v for k, v in self.options.items() if k != "label_selector"}
            remote = ray.remote(run_replica)
            with self._lock:
                if self._cancelled is None:
                    self._refs = [
                        remote.options(
                            name=f"{self.name}[{rank}]",
                            max_retries=0,
                            scheduling_strategy=strategy(rank),
                            **task_options,
                        ).remote(
                            self.payload,
                            self.name,
                            replica_log(self.log_path, rank),
                            rank_env(rank, replicas, address, port),
                            self.echo and rank == 0,
                        )
                        for rank in range(replicas)
                    ]
            if self._is_cancelled():
                raise TaskCancelledError(f"task {self.name!r} was cancelled ({self._cancelled})")
            return self._wait()
        finally:
            remove_placement_group(pg)

    def _bundle_nodes(self, pg: Any) -> list[str]:
        """The address of the node holding each bundle of the placement group `pg`."""
        from ray.util import placement_group_table

        address = {n["NodeID"]: n.get("NodeManagerAddress", n["NodeID"]) for n in self.ray.nodes()}
        nodes = placement_group_table(pg).get("bundles_to_node_id", {})
        return [address.get(nodes.get(i), str(nodes.get(i))) for i in range(len(nodes))]

    def _is_cancelled(self) -> bool:
        with self._lock:
            return self._cancelled is not None

    def _wait(self) -> Any:
        """Rank 0's value; on the first failure, cancel the other replicas and raise its error."""
        ray = self.ray
        pending = list(self._refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            error = self._error_of(done[0])
            if error is None:
                continue
            # The others may fail of it in turn: let them report why, briefly, then stop the rest.
            errors = [error]
            finished, pending = ray.wait(pending, num_returns=len(pending), timeout=GRACE_S)
            errors += [e for e in map(self._error_of, finished) if e is not None]
            for ref in pending:
                ray.cancel(ref, force=True)
            rank, cause = root_cause(errors)
            if is_peer_loss(cause):
                # No replica reported an error of its own in the grace period: one vanished with its
                # worker or node (which Ray may take longer to declare dead). Retry like a lost replica.
                raise TaskLostError(
                    f"replica rank {rank} of task {self.name!r} lost its peers and no replica reported an "
                    f"error of its own: a replica's worker or node is gone ({str(cause).splitlines()[0][:200]})"
                ) from None
            if isinstance(cause, TaskLostError):
                cause.replica = rank  # type: ignore[attr-defined]  # the one whose worker or node died
            cause.add_note(
                f"replica rank {rank} of {len(self._refs)} failed; the other replicas were stopped"
            )
            raise cause from None
        return ray.get(self._refs[0])

    def _error_of(self, ref: Any) -> tuple[int, BaseException] | None:
        """(rank, the replica's own error) when the finished replica `ref` failed, else None."""
        try:
            self.ray.get(ref)
        except BaseException as exc:  # noqa: BLE001 - the replica's failure, to report
            rank = self._refs.index(ref)
            lost = (
                self.ray.exceptions.WorkerCrashedError,
                self.ray.exceptions.NodeDiedError,
                self.ray.exceptions.ObjectLostError,
            )
            if isinstance(exc, lost):
                return rank, TaskLostError(
                    f"replica rank {rank} of task {self.name!r}: its Ray worker or node died (preempted, killed "
                    f"or out of memory): {type(exc).__name__}"
                )
            return rank, self.own_exception(exc, f"{self.name}[{rank}]")
        return None


def why_gang_never_fits(
    need: dict[str, float], nodes: list[dict[str, float]], replicas: int, strategy: str
) -> str | None:
    """Why `replicas` bundles of `need` can never be placed on `nodes` (their total resources) with
    `strategy`, or None when they can."""

    def fits(node: dict[str, float]) -> int:  # how many bundles this node holds
        return min((int(node.get(k, 0) // v + 1e-9) for k, v in need.items() if v), default=replicas)

    counts = [fits(node) for node in nodes]
    asked = ", ".join(f"{k}={v:g}" for k, v in need.items())
    if strategy == "STRICT_PACK" and not any(c >= replicas for c in counts):
        return (
            f"it asks for {replicas} replicas of {asked} on one node (gang_placement=STRICT_PACK) and the "
            f"largest node holds {max(counts, default=0)}; use gang_placement='SPREAD' or a bigger node"
        )
    if strategy == "STRICT_SPREAD" and sum(1 for c in counts if c >= 1) < replicas:
        return (
            f"it asks for {replicas} replicas of {asked}, each on its own node (gang_placement=STRICT_SPREAD), "
            f"and only {sum(1 for c in counts if c >= 1)} node(s) can hold one; add nodes or use 'SPREAD'"
        )
    if sum(counts) < replicas:
        return (
            f"it asks for {replicas} replicas of {asked} and the whole cluster holds {sum(counts)} "
            f"(per node: {', '.join(map(str, counts)) or 'no nodes'}); add nodes, ask for fewer "
            "replicas or less per replica"
        )
    return None
