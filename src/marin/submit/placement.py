"""Where a job runs: the interpreter that suits the head, and a prefix every node of the cluster can see."""

from __future__ import annotations

import functools
import ipaddress
import os
import socket
import sys
import urllib.parse

from marin.submit.client import SubmitError, _address, _client, _why

_NETWORK_FILESYSTEMS = (
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "smbfs",
    "lustre",
    "gpfs",
    "ceph",
    "glusterfs",
    "beegfs",
    "fuse.gcsfuse",
    "fuse.s3fs",
    "fuse.juicefs",
    "fuse.sshfs",
    "9p",
    "virtiofs",
)


def is_local_address(address: str) -> bool:
    """Whether the Ray Jobs API `address` (http://HOST:PORT) is served by this machine."""
    host = urllib.parse.urlparse(address if "://" in address else f"http://{address}").hostname or ""
    try:
        ips = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    mine = _own_addresses()
    return all(ipaddress.ip_address(ip.split("%")[0]).is_loopback or ip in mine for ip in ips) and bool(ips)


@functools.cache
def _own_addresses() -> frozenset[str]:
    import psutil

    return frozenset(a.address.split("%")[0] for addrs in psutil.net_if_addrs().values() for a in addrs)


def interpreter_for(address: str) -> str:
    """The interpreter the job's entrypoint runs: this one for a head on this machine, else `python`."""
    return sys.executable if is_local_address(address) else "python"


def count_machines(address: str | None) -> int:
    """How many machines (distinct node addresses) the live nodes of the cluster behind the Jobs API
    `address` are on: nodes sharing one machine share its disk."""
    from ray.util.state import list_nodes

    _client(address)  # the same token and one-line errors as every other call
    try:
        nodes = list_nodes(address=_address(address), filters=[("state", "=", "ALIVE")], timeout=30)
    except Exception as exc:  # noqa: BLE001 - connection and authentication errors come in many types
        raise SubmitError(
            f"cannot list the nodes of the Ray cluster at {_address(address)}: {_why(exc)}"
        ) from None
    return len({node.node_ip for node in nodes})


def is_shared_storage(prefix: str) -> bool:
    """Whether every node of a cluster could see `prefix`: an object store URL (gs://, s3://, ...) or
    an absolute path on a network filesystem mounted here."""
    scheme = prefix.split("://", 1)[0] if "://" in prefix else ""
    if scheme:
        return scheme not in ("file", "local", "memory")
    if not os.path.isabs(prefix):
        return False
    import psutil

    path = os.path.realpath(prefix)
    mounts = [
        p
        for p in psutil.disk_partitions(all=True)
        if path == p.mountpoint or path.startswith(p.mountpoint.rstrip("/") + "/")
    ]
    if not mounts:
        return False
    return max(mounts, key=lambda p: len(p.mountpoint)).fstype in _NETWORK_FILESYSTEMS


def resolve_prefix(prefix: str | None, machines: int) -> tuple[str, str | None]:
    """The job's MARIN_PREFIX and a warning to show, or SubmitError for node-local storage on a
    cluster that spans several machines. No prefix means $MARIN_PREFIX, else ./marin-outputs (made absolute)."""
    chosen = prefix or os.environ.get("MARIN_PREFIX") or "marin-outputs"
    if is_shared_storage(chosen):
        return chosen, None
    absolute = chosen if "://" in chosen else os.path.abspath(chosen)
    if machines > 1:
        raise SubmitError(
            f"the prefix {chosen!r} is on one machine's disk, and the cluster's nodes are on {machines} "
            "machines: a step on another one could not read its inputs or write where the runner looks. Pass --prefix "
            "gs://BUCKET/marin (or s3://...), or an absolute path on a filesystem every node mounts (NFS)"
        )
    return absolute, (
        f"warning: outputs go to {absolute} on the cluster's machine (its local disk); fine while every "
        "node runs on that one machine, but pass --prefix gs://BUCKET/marin before adding machines"
    )
