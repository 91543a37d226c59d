"""RayCluster: each task runs as a Ray task placed by Ray on a node with the resources it asks for.

ray is imported when a RayCluster is built, never when fray.cluster is imported.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cloudpickle

import rayconnect
from fray.cluster.base import Cluster
from fray.cluster.errors import RemoteTaskError, ResourcesUnavailableError, TaskCancelledError, TaskLostError
from fray.cluster.logs import redirect_output
from fray.cluster.placement import label_selector, selector_matches, why_no_node_is_allowed
from fray.cluster.ray_gang import RayGang, bundle_of, why_gang_never_fits
from fray.cluster.ray_stop import stop_tasks
from fray.cluster.resource_config import GpuConfig, ResourceConfig, TpuConfig, format_size

_NODES_TTL_S = 10.0
AUTOSCALING_ENV = "FRAY_RAY_AUTOSCALING"


@dataclass(frozen=True)
class _Node:
    """A live Ray node as the feasibility check sees it: its total resources and its labels."""

    resources: dict[str, float]
    labels: dict[str, str]


def run_on_worker(payload: bytes, name: str, log_path: str | None, echo: bool = False) -> Any:
    """What a Ray worker runs: unpickle the task and call it with stdout/stderr going to `log_path`
    (with `echo`, also to the worker's stderr, which Ray forwards to the driver)."""
    task = cloudpickle.loads(payload)
    with redirect_output(log_path, name, echo=echo):
        return task()


class RayCluster(Cluster):
    """Runs each task as a Ray remote call with num_cpus, num_gpus, memory and accelerator_type taken
    from its ResourceConfig, on the nodes its `regions` and `preemptible` allow (node labels, see
    fray.cluster.placement).

    Connects to `address`, else to `RAY_ADDRESS`, else starts a local Ray. A task whose worker dies
    (a preempted node, a killed process) is retried up to `max_retries` times; an exception raised by
    the task itself is retried only when `retry_exceptions=True`. A task that no node of the cluster
    could ever hold (a GPU on a CPU-only cluster, a region no node is in) fails at once; pass
    `check_feasible=False` (or set
    FRAY_RAY_AUTOSCALING=1, as the KubeRay manifest does) for an autoscaling cluster that adds such
    nodes on demand. With `echo`, each running task's output lines also reach this process's stderr
    (through Ray's log forwarding, prefixed with the task's name), as LocalCluster's echo shows them;
    it takes effect when this cluster is the one that connects this process to Ray.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        max_retries: int = 3,
        retry_exceptions: bool = False,
        check_feasible: bool | None = None,
        namespace: str | None = None,
        echo: bool = False,
    ):
        import ray

        self._ray = ray
        self.max_retries = max_retries
        self.retry_exceptions = retry_exceptions
        if check_feasible is None:
            check_feasible = os.environ.get(AUTOSCALING_ENV, "0") not in ("1", "true", "yes")
        self.check_feasible = check_feasible
        self.echo = echo
        self._started_ray = rayconnect.connect(address, namespace=namespace, log_to_driver=echo)
        self._remote = ray.remote(run_on_worker)
        self._nodes: list[_Node] = []
        self._nodes_at = 0.0
        # Callers' threads (cancel) and Ray's callback thread (settle) share these: one lock for both.
        self._lock = threading.Lock()
        self._refs: dict[concurrent.futures.Future, Any] = {}  # unsettled futures and their Ray refs
        self._cancelled: dict[
            concurrent.futures.Future, str
        ] = {}  # why cancel() stopped them (unsettled only)
        self._gangs: dict[concurrent.futures.Future, RayGang] = {}  # unsettled multi-replica tasks

    def _forget_gang(self, future: concurrent.futures.Future) -> None:
        with self._lock:
            self._gangs.pop(future, None)

    def submit(
        self,
        task: Callable[[], Any],
        *,
        name: str,
        resources: ResourceConfig | None = None,
        log_path: str | None = None,
        on_preemption: Callable[[dict[str, Any]], None] | None = None,
    ) -> concurrent.futures.Future:
        """Start `task` as a Ray task; the future resolves to its value or raises its exception.

        A multi-replica task (a gang) that loses a replica starts again, up to `max_retries` times,
        calling `on_preemption` with each lost replica first. Every attempt appends to the log.
        """
        resources = resources or ResourceConfig.with_cpu()
        options = ray_options(resources)
        problem = None
        if self.check_feasible:
            problem = self._why_never_fits(options, resources)
            if problem is None and resources.replicas > 1:
                nodes = [
                    n.resources
                    for n in self._alive_nodes(False)
                    if selector_matches(options.get("label_selector", {}), n.labels)
                ]
                problem = why_gang_never_fits(
                    bundle_of(options), nodes, resources.replicas, str(resources.gang_placement)
                )
        if problem:
            failed: concurrent.futures.Future = concurrent.futures.Future()
            failed.set_exception(
                ResourcesUnavailableError(f"task {name!r} cannot run on this Ray cluster: {problem}")
            )
            return failed
        if resources.replicas > 1:
            gang = RayGang(
                self._ray,
                task,
                name=name,
                resources=resources,
                options=options,
                log_path=log_path,
                echo=self.echo,
                own_exception=self._own_exception,
                max_retries=self.max_retries,
                on_preemption=on_preemption,
            )
            with self._lock:
                self._gangs[gang.future] = gang
            gang.future.add_done_callback(self._forget_gang)
            return gang.start()
        ref = self._remote.options(
            name=name,
            max_retries=self.max_retries,
            retry_exceptions=self.retry_exceptions,
            **options,
        ).remote(cloudpickle.dumps(task), name, log_path, self.echo)
        return self._as_future(ref, name)

    def cancel(self, future: concurrent.futures.Future, reason: str = "", *, grace_s: float = 0.0) -> None:
        """Cancel the Ray task behind `future`: its worker is killed (`ray.cancel(force=True)`), at once
        or, with `grace_s` > 0, once the task, interrupted (`ray.cancel`: KeyboardInterrupt in it), has
        had `grace_s` seconds to end by itself; the future fails with TaskCancelledError naming
        `reason`. A settled future is left alone."""
        with self._lock:
            gang = self._gangs.get(future)
        if gang is not None:
            gang.cancel(reason, grace_s=grace_s)
            return
        with self._lock:
            ref = self._refs.get(future)
            if ref is None:
                return
            self._cancelled.setdefault(future, reason or "cancelled")
        stop_tasks(self._ray, [ref], grace_s, future.done)

    def shutdown(self) -> None:
        """Disconnect from Ray (stopping it if this cluster started it)."""
        if self._started_ray and self._ray.is_initialized():
            self._ray.shutdown()

    def _as_future(self, ref: Any, name: str) -> concurrent.futures.Future:
        """A Future of the task's own value or exception, not Ray's wrappers of them."""
        result: concurrent.futures.Future = concurrent.futures.Future()

        def settle(done: concurrent.futures.Future) -> None:
            with self._lock:
                self._refs.pop(result, None)
                reason = self._cancelled.pop(result, None)
            try:
                result.set_result(done.result())
            except BaseException as error:  # noqa: BLE001 - every outcome must resolve `result`
                if reason is not None:
                    cancelled = f"task {name!r} was cancelled ({reason}): its Ray task was stopped"
                    result.set_exception(TaskCancelledError(cancelled))
                else:
                    result.set_exception(self._own_exception(error, name))

        with self._lock:
            self._refs[result] = ref
        ref.future().add_done_callback(settle)  # outside the lock: it calls settle at once if Ray is done
        return result

    def _own_exception(self, exc: BaseException, name: str) -> BaseException:
        """The task's own exception for a RayTaskError, TaskLostError for a dead worker, else `exc`."""
        exceptions = self._ray.exceptions
        if isinstance(exc, exceptions.RayTaskError):
            cause = getattr(exc, "cause", None)
            if not isinstance(cause, BaseException):
                return RemoteTaskError(f"task {name!r} failed:\n{exc}")
            # str(exc) is the remote traceback; Ray's wrapper class would hide the task's own type.
            cause.add_note(f"raised in a Ray worker (task {name!r}):\n{exc}")
            return cause
        if isinstance(
            exc, (exceptions.WorkerCrashedError, exceptions.NodeDiedError, exceptions.ObjectLostError)
        ):
            return TaskLostError(
                f"task {name!r}: its Ray worker died {self.max_retries + 1} time(s) "
                f"(preempted, killed or out of memory) and no retry was left: {exc}"
            )
        return exc

    def _why_never_fits(self, options: dict[str, Any], resources: ResourceConfig) -> str | None:
        selector = options.get("label_selector", {})
        need = {
            "CPU": options.get("num_cpus", 0),
            "GPU": options.get("num_gpus", 0),
            "memory": options.get("memory", 0),
        }
        need.update(options.get("resources", {}))
        if "accelerator_type" in options:
            need[f"accelerator_type:{options['accelerator_type']}"] = 0.001
        need = {k: v for k, v in need.items() if v}
        for fresh in (False, True):
            nodes = [n for n in self._alive_nodes(fresh) if selector_matches(selector, n.labels)]
            if any(all(node.resources.get(k, 0) >= v for k, v in need.items()) for node in nodes):
                return None
        if not nodes:
            return why_no_node_is_allowed(resources, [n.labels for n in self._nodes])
        asked = ", ".join(
            f"{k}={format_size(int(v)) if k == 'memory' else f'{v:g}'}" for k, v in need.items()
        )
        have = "; ".join(
            ", ".join(
                f"{k}={format_size(int(v)) if k == 'memory' else f'{v:g}'}"
                for k, v in sorted(node.resources.items())
                if k in ("CPU", "GPU", "TPU", "memory") or k.startswith(("accelerator_type:", "TPU-"))
            )
            for node in nodes
        )
        where = [f"in {', '.join(resources.regions)}"] if resources.regions else []
        where += [] if resources.preemptible else ["not preemptible"]
        allowed = f" ({', '.join(where)})" if where else ""
        return (
            f"it asks for {asked} and no node{allowed} has that (nodes: {have or 'none'}); add a node with those "
            f"resources, ask for less, or set {AUTOSCALING_ENV}=1 if the cluster autoscales"
        )

    def _alive_nodes(self, fresh: bool) -> list[_Node]:
        if fresh or time.monotonic() - self._nodes_at > _NODES_TTL_S:
            self._nodes = [
                _Node(n["Resources"], n.get("Labels") or {}) for n in self._ray.nodes() if n.get("Alive")
            ]
            self._nodes_at = time.monotonic()
        return self._nodes


def ray_options(resources: ResourceConfig) -> dict[str, Any]:
    """The `.options(...)` of a Ray remote call that asks for `resources`."""
    options: dict[str, Any] = {"num_cpus": resources.cpu}
    if resources.ram is not None:
        options["memory"] = resources.ram
    device = resources.device
    if isinstance(device, GpuConfig):
        options["num_gpus"] = device.count
        if device.type != "auto":
            options["accelerator_type"] = device.type
    elif isinstance(device, TpuConfig):
        options["accelerator_type"] = f"TPU-{device.generation.upper()}"
        chips = (device.cores or 4) // (2 if device.generation in ("v2", "v3", "v4") else 1)
        options["resources"] = {"TPU": min(4, max(chips, 1))}
        if chips > 4:
            # A multi-host slice: Ray's TPU nodes advertise one '{type}-head' resource per slice.
            options["resources"][f"TPU-{device.type}-head"] = 1
    runtime_env: dict[str, Any] = {}
    if resources.env_vars:
        runtime_env["env_vars"] = dict(resources.env_vars)
    if resources.pip_packages:
        runtime_env["pip"] = list(resources.pip_packages)
    if runtime_env:
        options["runtime_env"] = runtime_env
    selector = label_selector(resources)
    if selector:
        options["label_selector"] = selector
    return options
