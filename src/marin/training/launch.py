"""Run a TrainJob on one process, or on several that form one torch.distributed group.

Several are a local gang of fray's (`fray.cluster.gang.run_as_local_gang`): each process runs `train`
with the torchrun variables set (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and dies with
the process that launched it. Inside a replica of a multi-host step (a gang, which sets those
variables for the replica) the processes join the gang's group, as torchrun's do on each node:
global rank = replica rank x processes + local rank. If one fails, the others are stopped and its own
error is raised, with a note naming its rank; a rerun resumes from the last checkpoint.
"""

from __future__ import annotations

import functools

from fray.cluster import run_as_local_gang
from marin.training.trainer import TrainJob, train


def run_job(job: TrainJob, num_processes: int = 1) -> dict:
    """Train `job` on `num_processes` data-parallel processes and return this host's first one's summary,
    whose headline (what `marin status` shows) is the final training loss."""
    if num_processes == 1:
        summary = train(job)
    else:
        summary = run_as_local_gang(functools.partial(train, job), num_processes, join_outer_group=True)
    if isinstance(summary, dict) and isinstance(summary.get("final_loss"), int | float):
        summary = {"headline": {"metric": "final_loss", "value": summary["final_loss"]}} | summary
    return summary
