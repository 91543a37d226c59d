"""A real multi-node Ray cluster on this machine: a head and worker nodes started with `ray start`.

Every port is chosen free and every process is found by this cluster's own temp dir or address, so
several such clusters (and other Ray users on the machine) never collide, and stopping one kills only
the processes it started (never `ray stop`, which stops every Ray on the machine).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

import psutil

# ports.py and processes.py are beside this file; benchmarks load this file by path or as `tests.<name>`.
if os.path.dirname(__file__) not in sys.path:
    sys.path.append(os.path.dirname(__file__))
from ports import free_port  # noqa: E402
from processes import kill_all  # noqa: E402

RAY = os.path.join(os.path.dirname(sys.executable), "ray")
CLUSTER_MARK = "TESTS_RAY_CLUSTER"  # a node's processes carry their cluster's temp dir in it

# The node labels of the suite's shared cluster (tests/conftest.py): Ray's well-known region and
# market-type labels, which fray maps ResourceConfig.regions and preemptible to.
HEAD_LABELS = {"ray.io/availability-region": "us-east1"}
WORKER_LABELS = {"ray.io/availability-region": "us-central1", "ray.io/market-type": "spot"}


def ensure_auth_token() -> None:
    """Create Ray's default auth token file (~/.ray/auth_token) unless it exists."""
    if not (os.environ.get("RAY_AUTH_TOKEN") or os.path.exists(os.path.expanduser("~/.ray/auth_token"))):
        code = "from ray._private.authentication.authentication_token_setup import generate_and_save_token as g; g()"
        subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def decoy_python_dir(folder: str) -> str:
    """`folder`, holding a `python` and a `python3` that are not this environment's: each prints that
    it is a decoy and exits 1 (a node's PATH as on a machine whose system python lacks the packages)."""
    os.makedirs(folder, exist_ok=True)
    for name in ("python", "python3"):
        script = os.path.join(folder, name)
        with open(script, "w") as f:
            f.write('#!/bin/sh\necho "decoy $0: not the environment\'s python" >&2\nexit 1\n')
        os.chmod(script, 0o755)
    return folder


def _node_ports() -> list[str]:
    return [
        f"--node-manager-port={free_port()}",
        f"--object-manager-port={free_port()}",
        f"--dashboard-agent-listen-port={free_port()}",
        f"--dashboard-agent-grpc-port={free_port()}",
        f"--runtime-env-agent-port={free_port()}",
        f"--metrics-export-port={free_port()}",
        # Ray's workers take ports 10002-19999 unless told otherwise, every cluster the same ones.
        "--min-worker-port=0",
        "--max-worker-port=0",
    ]


def _labels_flag(labels: dict[str, str]) -> list[str]:
    return [f"--labels={','.join(f'{k}={v}' for k, v in labels.items())}"] if labels else []


# `ray start` gives a node 30 s (a constant of Ray's) to register; on a loaded machine its agents can take
# longer to start. The cluster is then stopped and started once more; a second failure is an error that
# says so, with the load average and the ends of the nodes' logs.
TIMED_OUT = "The current node timed out during startup"
STARTS = 2
START_TIMEOUT_S = 180  # one `ray start`: its node's daemons and agents, on a loaded machine
NODE_LOGS = ("raylet*.out", "gcs_server.out", "dashboard_agent*.log", "runtime_env_agent*.log")


class NodeStartTimedOut(RuntimeError):
    """`ray start` gave up waiting for its node to register (see TIMED_OUT)."""


@dataclass
class LocalRayCluster:
    """A head node plus `workers` worker nodes, each with `cpus_per_node` CPUs.

    `head_labels` and `worker_labels` are Ray node labels (`ray start --labels`) of the head and of
    every worker, e.g. {"ray.io/availability-region": "us-central1", "ray.io/market-type": "spot"}.
    """

    workers: int = 1
    cpus_per_node: int = 1
    head_cpus: int | None = None  # the head's CPUs when not cpus_per_node (0: it runs no tasks)
    dashboard: bool = False
    head_resources: dict[str, float] = field(default_factory=dict)
    head_labels: dict[str, str] = field(default_factory=dict)
    worker_labels: dict[str, str] = field(default_factory=dict)
    path: str | None = (
        None  # the nodes' PATH (default: this process's, as for `.venv/bin/ray start` in a shell)
    )
    address: str = ""
    dashboard_url: str = ""
    temp_dir: str = ""

    def start(self) -> LocalRayCluster:
        """Start the head, then the workers; returns self once every node has joined.

        Token authentication is on for every node and for this process (Ray's default for a local
        cluster since 2.5x, and what a process that once called `ray.init()` is left in); the token
        is Ray's default file, created here when missing.
        """
        os.environ["RAY_AUTH_MODE"] = "token"
        if "ray" in sys.modules:
            # ray read RAY_AUTH_MODE when it was imported; make this process see token mode too
            # (what ray.init does for itself when it turns token auth on).
            from ray._raylet import Config

            Config.initialize("")
        ensure_auth_token()
        workers = self.workers
        for attempt in range(1, STARTS + 1):
            try:
                return self._start_nodes(workers)
            except NodeStartTimedOut as e:
                if attempt == STARTS:
                    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
                    raise NodeStartTimedOut(
                        f"the test Ray cluster did not start in {STARTS} tries, at load average {load}: "
                        "a node has 30 s to register with its head, which a machine this loaded can "
                        f"exceed. The last try: {e}"
                    ) from None
        raise AssertionError("unreachable")

    def _start_nodes(self, workers: int) -> LocalRayCluster:
        # A short path: Ray's unix socket paths must stay under ~107 characters.
        self.temp_dir = tempfile.mkdtemp(prefix="fray-ray-", dir="/tmp")
        port, dash_port = free_port(), free_port()
        self.address = f"127.0.0.1:{port}"
        self.dashboard_url = f"http://127.0.0.1:{dash_port}"
        head = [
            RAY,
            "start",
            "--head",
            f"--port={port}",
            "--node-ip-address=127.0.0.1",
            f"--num-cpus={self.cpus_per_node if self.head_cpus is None else self.head_cpus}",
            f"--temp-dir={self.temp_dir}",
            f"--include-dashboard={'true' if self.dashboard else 'false'}",
            f"--dashboard-port={dash_port}",
            "--dashboard-host=127.0.0.1",
            f"--ray-client-server-port={free_port()}",
            "--disable-usage-stats",
            *_node_ports(),
        ]
        if self.head_resources:
            head.append(f"--resources={json.dumps(self.head_resources)}")
        self._run(head + _labels_flag(self.head_labels))
        self.workers = 0
        return self.add_workers(workers)

    def add_workers(self, count: int) -> LocalRayCluster:
        """Start `count` more worker nodes (as `workers` did) and wait for each to join; returns self."""
        for _ in range(count):
            self._run(
                [
                    RAY,
                    "start",
                    f"--address={self.address}",
                    "--node-ip-address=127.0.0.1",
                    f"--num-cpus={self.cpus_per_node}",
                    "--disable-usage-stats",
                    *_node_ports(),
                    *_labels_flag(self.worker_labels),
                ]
            )
            self.workers += 1
        return self

    def _run(self, cmd: list[str]) -> None:
        # As docs/clusters.md starts nodes: `RAY_AUTH_MODE=token .venv/bin/ray start ...`, the venv not
        # activated, so the nodes' `python` on PATH is whatever the shell's is, not the venv's.
        path = os.environ.get("PATH", "") if self.path is None else self.path
        env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="token", PATH=path)
        env[CLUSTER_MARK] = self.temp_dir  # inherited by every process of the node: how stop() finds them
        env.pop("RAY_ADDRESS", None)
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=START_TIMEOUT_S)
        except subprocess.TimeoutExpired as e:  # what it started lives on without it: stop them all
            logs = self._log_ends()
            self.stop()
            raise NodeStartTimedOut(f"{' '.join(cmd)} did not return in {e.timeout:g} s\n{logs}") from None
        if done.returncode != 0:
            logs = self._log_ends()
            self.stop()
            error = NodeStartTimedOut if TIMED_OUT in done.stderr else RuntimeError
            raise error(f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}\n{logs}")

    def _log_ends(self, lines: int = 8) -> str:
        """The last lines of each node's daemon logs (NODE_LOGS), read before stop() removes them."""
        ends = []
        for name in NODE_LOGS:
            for path in sorted(glob.glob(os.path.join(self.temp_dir, "session_latest", "logs", name))):
                with open(path, errors="replace") as f:
                    tail = f.readlines()[-lines:]
                ends.append(f"--- {os.path.relpath(path, self.temp_dir)}:\n{''.join(tail)}")
        return "\n".join(ends)

    def _disconnect_this_process(self) -> None:
        # Ray's driver excepthook reports an uncaught exception to the GCS before printing it: a driver
        # still connected to a cluster stopped under it (a `finally:` around a failing block) waits 60 s
        # for the GCS, then aborts, and the exception's traceback is never printed.
        # The GCS names itself by the node's own IP, not by 127.0.0.1: compare ports.
        ray = sys.modules.get("ray")
        if ray is None or not ray.is_initialized() or not self.address:
            return
        if ray.get_runtime_context().gcs_address.rsplit(":", 1)[1] == self.address.rsplit(":", 1)[1]:
            ray.shutdown()

    def processes(self) -> list[psutil.Process]:
        """Every process of this cluster: its daemons and their children, found by their environment
        (CLUSTER_MARK, or a TMPDIR that is the temp dir: `ray start` run in a shell that set it), or
        named by temp dir or address."""
        marks = [m for m in (self.temp_dir, self.address) if m]
        if self.address:
            # Ray's client-server proxy names the head by the node's own IP, not by 127.0.0.1.
            marks.append(f":{self.address.rsplit(':', 1)[1]} ")
        found: dict[int, psutil.Process] = {}
        for proc in psutil.process_iter(["cmdline"]):
            try:
                if any(m in " ".join(proc.info["cmdline"] or []) for m in marks) or self._marked(proc):
                    found[proc.pid] = proc
                    for child in proc.children(recursive=True):
                        found[child.pid] = child
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        found.pop(os.getpid(), None)
        return list(found.values())

    def _marked(self, proc: psutil.Process) -> bool:
        if not self.temp_dir:
            return False
        try:
            env = proc.environ()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return False
        return self.temp_dir in (env.get(CLUSTER_MARK), env.get("TMPDIR"))

    def stop(self) -> None:
        """Disconnect this process from the cluster, then kill the cluster's processes by pid and wait
        for them to exit."""
        self._disconnect_this_process()
        kill_all(self.processes())
        if self.temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
