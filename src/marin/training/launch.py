"""Run a TrainJob on one or several processes, the way torchrun would start them.

With several, each worker is `python -m marin.training.launch JOB_FILE` with RANK, LOCAL_RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT set; the job travels as a pickle in a local temporary folder.
If any worker fails, the others are terminated and the failure is raised with its exit code.
This host's first process writes the summary the caller returns. Inside a replica of a gang
(fray.cluster.gang, which sets RANK, WORLD_SIZE and MASTER_* for the replica), the processes join the
gang's group, as torchrun's do on each node: global rank = replica rank x processes + local rank. A worker
dies with the process that launched it
even when that process gets no chance to clean up (SIGKILL, or a cluster worker's `os._exit`).
"""

from __future__ import annotations

import ctypes
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import time

from fray.task_process import exit_when_parent_dies
from marin.execution.errors import MarinError
from marin.training.trainer import TrainJob, train

_JOB_FILE = ".train_job.pkl"
_SUMMARY_FILE = ".train_summary.json"
_LAUNCHER_PID = "MARIN_TRAIN_LAUNCHER_PID"
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


class TrainWorkerError(MarinError):
    """A training worker process exited with an error."""


def run_job(job: TrainJob, num_processes: int = 1) -> dict:
    """Train `job` on `num_processes` data-parallel processes and return rank 0's summary."""
    if num_processes == 1:
        return train(job)
    with tempfile.TemporaryDirectory(prefix="marin-train-") as folder:
        job_file = os.path.join(folder, _JOB_FILE)
        with open(job_file, "wb") as f:
            pickle.dump(job, f)
        _start_and_wait(job_file, num_processes)
        with open(os.path.join(folder, _SUMMARY_FILE)) as f:
            return json.load(f)


def _start_and_wait(job_file: str, num_processes: int) -> None:
    # Inside a gang replica (fray.cluster.gang set RANK/WORLD_SIZE/MASTER_*), this host's processes
    # join the gang's group, as torchrun's do on each of several nodes: global rank = replica rank x
    # processes per replica + local rank.
    node_rank, nodes = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    if nodes > 1:
        address, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    else:
        node_rank, address, port = 0, "127.0.0.1", _free_port()
    workers = []
    for rank in range(num_processes):
        env = dict(
            os.environ,
            RANK=str(node_rank * num_processes + rank),
            LOCAL_RANK=str(rank),
            WORLD_SIZE=str(nodes * num_processes),
            LOCAL_WORLD_SIZE=str(num_processes),
            MASTER_ADDR=address,
            MASTER_PORT=str(port),
            **{_LAUNCHER_PID: str(os.getpid())},
        )
        workers.append(subprocess.Popen([sys.executable, "-m", "marin.training.launch", job_file], env=env))
    _wait_all(workers)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_all(workers: list[subprocess.Popen]) -> None:
    try:
        while True:
            codes = [w.poll() for w in workers]
            failed = [(rank, code) for rank, code in enumerate(codes) if code not in (None, 0)]
            if failed:
                rank, code = failed[0]
                raise TrainWorkerError(
                    f"training worker rank {rank} exited with code {code}; its traceback is in the step's log "
                    "above. The other workers were stopped; rerun the step to resume from the last checkpoint"
                )
            if all(code == 0 for code in codes):
                return
            time.sleep(0.2)
    finally:
        for w in workers:
            if w.poll() is None:
                w.terminate()
        for w in workers:
            try:
                w.wait(timeout=30)
            except subprocess.TimeoutExpired:
                w.kill()


def _die_with_launcher() -> None:
    """Make this worker exit when the process that launched it dies, however it dies.

    On Linux the kernel sends SIGKILL on the launcher's death (PR_SET_PDEATHSIG: strictly, when the
    launching thread ends, and that thread waits in `_wait_all` for as long as workers run); elsewhere a
    thread watches the parent pid. Either way, a launcher that died before the guard was in place
    is caught by comparing the parent pid with the one the launcher passed down.
    """
    launcher = int(os.environ.get(_LAUNCHER_PID, "0")) or None
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            exit_when_parent_dies(parent=launcher, exit_code=1)
    else:
        exit_when_parent_dies(parent=launcher, exit_code=1)
    if launcher is not None and os.getppid() != launcher:
        os._exit(1)  # the launcher is already gone: nobody will read what this worker would write


def _worker(job_file: str) -> None:
    with open(job_file, "rb") as f:
        job: TrainJob = pickle.load(f)
    summary = train(job)
    if int(os.environ.get("LOCAL_RANK", "0")) == 0:  # this host's first process: its launcher returns it
        path = os.path.join(os.path.dirname(job_file), _SUMMARY_FILE)
        with open(path + ".tmp", "w") as f:
            json.dump(summary, f)
        os.replace(path + ".tmp", path)


if __name__ == "__main__":
    _die_with_launcher()
    _worker(sys.argv[1])
