"""A training process's place in its group: torch.distributed set up as torchrun sets it, and its device.

One process needs no group, except under FSDP (FSDP and sharded checkpoints work on a process group,
even one of a single process). Several read RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
MASTER_PORT (`marin.training.launch` and fray's gangs set them, as torchrun does) and join one group:
NCCL on GPUs, gloo on CPU.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

import torch
import torch.distributed as dist

from marin.training.config import Parallelism, TrainConfig
from marin.training.errors import TrainingConfigError


@dataclass
class Distributed:
    """This process's rank, the world size, its local rank, and whether it set up the group."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    owns_group: bool = False  # this process initialized torch.distributed (and tears it down)


def init_distributed(device_type: str, parallelism: Parallelism) -> Distributed:
    """Join (or, alone under FSDP, make) the process group the environment describes."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    backend = "nccl" if device_type == "cuda" else "gloo"
    if world_size == 1:
        if parallelism != Parallelism.FSDP or dist.is_initialized():
            return Distributed()
        dist.init_process_group(backend=backend, store=dist.HashStore(), rank=0, world_size=1)
        return Distributed(owns_group=True)
    env = Distributed(int(os.environ["RANK"]), world_size, int(os.environ.get("LOCAL_RANK", "0")))
    if not dist.is_initialized():
        dist.init_process_group(
            backend=backend,
            store=rendezvous_store(env.rank, world_size),
            rank=env.rank,
            world_size=world_size,
        )
        env.owns_group = True
    return env


def rendezvous_store(rank: int, world_size: int) -> dist.TCPStore:
    """The group's TCPStore at MASTER_ADDR:MASTER_PORT, as `env://` makes it but listening on that
    address only: torch's own server listens on every interface (`*`), which exposes the store
    to every network the node is on. Rank 0 binds the socket itself and hands it to the store.
    Under torchrun, whose agent already serves the store there, every rank is a client (as `env://`)."""
    address, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    timeout = dist.constants.default_pg_timeout
    if rank != 0 or os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        return dist.TCPStore(address, port, world_size, False, timeout)
    family, kind, proto, _, where = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM)[0]
    listener = socket.socket(family, kind, proto)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(where)
    listener.listen(128)
    return dist.TCPStore(address, port, world_size, True, timeout, master_listen_fd=listener.detach())


def wants_cuda(config: TrainConfig) -> bool:
    """Whether the run asks for CUDA (`device="cuda"`, or "auto" with a CUDA device present)."""
    return config.device == "cuda" or (config.device == "auto" and torch.cuda.is_available())


def pick_device(config: TrainConfig, local_rank: int) -> torch.device:
    """The device this process trains on (its local rank's GPU on CUDA)."""
    if not wants_cuda(config):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise TrainingConfigError("device='cuda' was asked for but torch sees no CUDA device")
    torch.cuda.set_device(local_rank)
    return torch.device("cuda", local_rank)
