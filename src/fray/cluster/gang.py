"""Gangs: a step with `ResourceConfig(replicas=R)` runs as R processes that form one torch.distributed group.

Every replica runs the same task with the torchrun variables set: RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT (rank 0's node and a port free there, found when the
gang starts, never a fixed one). The gang's value is rank 0's; it fails when any replica fails, and
the others are then stopped.

- LocalCluster: one launcher task holding R times the request starts R local processes
  (`python -m fray.cluster.gang FOLDER`); MASTER_ADDR is 127.0.0.1. `run_as_local_gang(task, n)` is
  the same launcher for code that starts its own processes (marin's trainer with `num_processes`);
  inside a replica of a gang it can join that replica's group, as torchrun's processes do on each
  node. Each local process dies with its launcher, however the launcher dies.
- RayCluster: a placement group with one bundle per replica (`gang_placement`: SPREAD by default,
  PACK, STRICT_PACK or STRICT_SPREAD), a probe in bundle 0 that returns its node's address and a free
  port, then one Ray task per replica in its bundle (see fray.cluster.ray_gang).

Rank 0 writes to the task's log; rank r > 0 to `{log}.rank{r}`.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

import cloudpickle

from fray.cluster.errors import FrayError, TaskLostError
from fray.cluster.resource_config import CpuConfig, GpuConfig, ResourceConfig

_TASK_FILE = "task.pkl"
_LAUNCHER_PID = "FRAY_GANG_LAUNCHER_PID"  # a local replica watches this pid, not whatever parent it has now
_INDEX = "FRAY_GANG_INDEX"  # a local process's index among its launcher's (its outcome file's name)
T = TypeVar("T")
GRACE_S = 5.0  # how long the other replicas of a failed gang get to report their own errors
_PEER_LOSS_MARKS = (
    "Connection reset by peer",
    "Connection closed by peer",
    "Broken pipe",
    "gloo/transport",
    "NCCL communicator was aborted",
    "Socket Timeout",
)


class GangReplicaError(FrayError):
    """A replica of a gang exited with an exit code and no outcome (os._exit, a crash of its own); one
    killed by a signal fails the gang with TaskLostError instead."""


def rank_env(
    rank: int,
    world_size: int,
    master_addr: str,
    master_port: int,
    *,
    local_rank: int = 0,
    local_world_size: int = 1,
) -> dict[str, str]:
    """The torchrun variables of one replica."""
    return {
        "RANK": str(rank),
        "WORLD_SIZE": str(world_size),
        "LOCAL_RANK": str(local_rank),
        "LOCAL_WORLD_SIZE": str(local_world_size),
        "MASTER_ADDR": master_addr,
        "MASTER_PORT": str(master_port),
    }


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on at `host` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def replica_log(log_path: str | None, rank: int) -> str | None:
    """Where replica `rank` writes its output."""
    if log_path is None or rank == 0:
        return log_path
    return f"{log_path}.rank{rank}"


@contextmanager
def environ(values: Mapping[str, str]) -> Iterator[None]:
    """`values` set in os.environ for the block, the previous values put back after."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def per_replica(resources: ResourceConfig) -> ResourceConfig:
    """What one replica of `resources` asks for (the same request with replicas=1)."""
    return dataclasses.replace(resources, replicas=1)


def whole_gang_on_one_machine(resources: ResourceConfig) -> ResourceConfig:
    """The request of a LocalCluster launcher of `resources.replicas` local replicas: R times each."""
    r = resources.replicas
    device = resources.device
    if isinstance(device, GpuConfig):
        device = dataclasses.replace(device, count=device.count * r)
    return dataclasses.replace(
        resources,
        replicas=1,
        cpu=resources.cpu * r,
        ram=resources.ram * r if resources.ram else None,
        device=device if not isinstance(device, CpuConfig) else CpuConfig(),
    )


def local_gang(
    task: Callable[[], Any], resources: ResourceConfig
) -> tuple[Callable[[], Any], ResourceConfig]:
    """The launcher task (and its request) that runs `task` as `resources.replicas` local processes."""
    return functools.partial(
        run_local_gang, cloudpickle.dumps(task), resources.replicas
    ), whole_gang_on_one_machine(resources)


def run_as_local_gang(task: Callable[[], T], processes: int, *, join_outer_group: bool = False) -> T:
    """Run `task` as `processes` processes of this machine that form one torch.distributed group (the
    torchrun variables set in each); the first process's value, or the root-cause error of the first
    that fails (the others are then stopped).

    With `join_outer_group`, a process that is itself one rank of a group (RANK, WORLD_SIZE > 1 and
    MASTER_* set, as in a gang's replica) makes its processes ranks of that group instead, as torchrun's
    do on each of several nodes: global rank = its rank x `processes` + local rank."""
    return run_local_gang(cloudpickle.dumps(task), processes, join_outer_group=join_outer_group)


def local_rank_envs(processes: int, *, join_outer_group: bool = False) -> list[dict[str, str]]:
    """The torchrun variables of each of `processes` local processes (see `run_as_local_gang`).

    Joining an outer group, local ranks count on from the replica's own: a replica with LOCAL_RANK l of
    LOCAL_WORLD_SIZE L gives its processes local ranks l x processes + i of L x processes, so two
    replicas of a gang on one machine (a LocalCluster's) index different GPUs of the
    CUDA_VISIBLE_DEVICES they share, as torchrun's processes of one node do. A Ray replica sees only
    its own GPUs (Ray sets CUDA_VISIBLE_DEVICES per task) and has LOCAL_RANK 0 of 1."""
    outer_rank, outer_world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    outer_local = int(os.environ.get("LOCAL_RANK", "0"))
    outer_local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    if join_outer_group and outer_world > 1:
        address, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    else:
        outer_rank, outer_world, address, port = 0, 1, "127.0.0.1", free_port()
        outer_local, outer_local_world = 0, 1
    return [
        {
            **rank_env(
                outer_rank * processes + local,
                outer_world * processes,
                address,
                port,
                local_rank=outer_local * processes + local,
                local_world_size=outer_local_world * processes,
            ),
            _INDEX: str(local),
        }
        for local in range(processes)
    ]


def run_local_gang(payload: bytes, replicas: int, *, join_outer_group: bool = False) -> Any:
    """Run the pickled task as `replicas` processes of this machine (see `run_as_local_gang`). In a
    LocalCluster worker the replicas inherit its output capture: their lines share the step's log."""
    with tempfile.TemporaryDirectory(prefix="fray-gang-") as folder:
        with open(os.path.join(folder, _TASK_FILE), "wb") as f:
            pickle.dump((list(sys.path), payload), f)
        launcher = {_LAUNCHER_PID: str(os.getpid())}
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "fray.cluster.gang", folder], env={**os.environ, **env, **launcher}
            )
            for env in local_rank_envs(replicas, join_outer_group=join_outer_group)
        ]
        try:
            with _passing_stop_signals(
                procs
            ):  # a cancelled gang's replicas may checkpoint, as one task would
                failed = _wait_for_gang(procs)
            if failed is not None:  # the others may fail of it in turn: let them report why, briefly
                deadline = time.monotonic() + GRACE_S
                while time.monotonic() < deadline and any(p.poll() is None for p in procs):
                    time.sleep(0.05)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
            for proc in procs:
                proc.wait()
        outcomes = {local: _read_outcome(folder, local) for local in range(replicas)}
        if failed is not None:
            errors = [(r, o[1]) for r, o in outcomes.items() if o is not None and o[0] == "error"]
            if errors:
                local, error = root_cause(errors)
                error.add_note(f"replica rank {local} of {replicas} failed; the other replicas were stopped")
                raise error
            local, code = failed
            if code < 0:  # killed by a signal from outside (or the OOM killer): lost, not failed
                raise TaskLostError(
                    f"replica rank {local} of {replicas} was killed by {signal.Signals(-code).name} (exited with "
                    f"code {code}) without reporting an outcome; the other replicas were stopped"
                )
            raise GangReplicaError(
                f"replica rank {local} of {replicas} exited with code {code} without reporting an outcome "
                "(os._exit or a crash); the other replicas were stopped"
            )
        kind, value = outcomes[0]
        if kind == "error":
            raise value
        return value


@contextmanager
def _passing_stop_signals(procs: list[subprocess.Popen]) -> Iterator[None]:
    """While the block runs, a SIGTERM to the launcher (LocalCluster's cancel) goes on to each replica
    still running, and a SIGINT is left to them (a terminal's Ctrl-C reaches the whole group); the
    launcher then waits for them as usual. Only the main thread can install it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def forward(signum: int, frame: Any) -> None:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signum)

    previous = {signal.SIGTERM: signal.signal(signal.SIGTERM, forward)}
    previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def is_peer_loss(error: BaseException) -> bool:
    """Whether `error` is a replica losing a peer of its group (a consequence, not a cause)."""
    if type(error).__name__ in ("DistBackendError", "DistNetworkError", "DistStoreError"):
        return True
    text = str(error)
    return isinstance(error, RuntimeError) and any(mark in text for mark in _PEER_LOSS_MARKS)


def root_cause(errors: list[tuple[int, BaseException]]) -> tuple[int, BaseException]:
    """Of the replicas' errors (rank, error) in the order they were seen, the one that caused the
    others: the first that is not a replica losing its peers, else the first."""
    return next(((r, e) for r, e in errors if not is_peer_loss(e)), errors[0])


def _wait_for_gang(procs: list[subprocess.Popen]) -> tuple[int, int] | None:
    """Wait until every replica exited 0 (None) or one failed: (its rank, its exit code)."""
    while True:
        codes = [p.poll() for p in procs]
        for rank, code in enumerate(codes):
            if code not in (None, 0):
                return rank, code
        if all(code == 0 for code in codes):
            return None
        time.sleep(0.05)


def _outcome_path(folder: str, rank: int) -> str:
    return os.path.join(folder, f"outcome-{rank}.pkl")


def _read_outcome(folder: str, rank: int) -> tuple[str, Any] | None:
    try:
        with open(_outcome_path(folder, rank), "rb") as f:
            return pickle.load(f)
    except FileNotFoundError:
        return None


def _replica_main(folder: str) -> None:
    """One local replica: run the task, write its outcome, exit 1 when it raised."""
    from procpool.lifeline import die_with_parent

    # The launcher's pid, not the current parent's: a launcher that died before this line is caught too.
    die_with_parent(int(os.environ.pop(_LAUNCHER_PID)), exit_code=1)
    with open(os.path.join(folder, _TASK_FILE), "rb") as f:
        sys_path, payload = pickle.load(f)
    sys.path.extend(p for p in sys_path if p not in sys.path)
    rank = int(os.environ.pop(_INDEX))  # a joined group's ranks and local ranks may not start at 0
    try:
        outcome: tuple[str, Any] = ("ok", cloudpickle.loads(payload)())
    except BaseException as exc:  # noqa: BLE001 - the launcher raises it
        outcome = ("error", exc)
    try:
        data = cloudpickle.dumps(outcome)
    except Exception as exc:  # noqa: BLE001 - an unpicklable value or exception travels as text
        data = cloudpickle.dumps(
            ("error", FrayError(f"replica rank {rank}: outcome cannot be pickled: {exc}"))
        )
    tmp = _outcome_path(folder, rank) + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, _outcome_path(folder, rank))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0 if outcome[0] == "ok" else 1)


if __name__ == "__main__":
    _replica_main(sys.argv[1])
