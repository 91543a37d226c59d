"""Where a job runs: the interpreter that suits the head, and a prefix every node of the cluster can see."""

from __future__ import annotations

import functools
import ipaddress
import os
import shlex
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


CLUSTER_PYTHON = "cluster"  # `--python cluster`: the interpreter the head's Ray runs its workers under

# POSIX sh, run by the job's shell on the head. Its parent is Ray's JobSupervisor, a Ray worker whose
# parent is the node's raylet, started with `--python_worker_command=PYTHON setup_worker.py ...`:
# PYTHON is the interpreter that ran `ray start` there (a venv's, or the image's). The supervisor's
# own /proc/PID/exe is no use: a venv's python is a symlink to the base interpreter, which lacks the
# venv's packages, and Ray overwrites the supervisor's command line with its process title.
_FIND_RAY_PYTHON = (
    'p=$PPID; while [ -z "$py" ] && [ "$p" -gt 1 ] 2>/dev/null; do '
    "py=$(tr '\\0' '\\n' </proc/$p/cmdline 2>/dev/null | sed -n 's/^--python_worker_command=\\([^ ]*\\).*/\\1/p'); "
    "p=$(sed -n 's/^PPid:[[:space:]]*//p' /proc/$p/status 2>/dev/null); done; "
)
_HAS_MARIN = "import importlib.metadata as m; m.distribution('marin')"


def interpreter_for(address: str) -> str:
    """The job's interpreter: this one for a head on this machine, else CLUSTER_PYTHON (the one the
    head's Ray runs under, found on the head when the job starts)."""
    return sys.executable if is_local_address(address) else CLUSTER_PYTHON


def job_command(python: str, argv: list[str], *, pip: bool = False, fallback: bool = False) -> str:
    """The job's shell command: `python ARGV...`.

    CLUSTER_PYTHON is found on the head. With `pip`, whatever `python` says, the job runs in the
    virtualenv Ray made for the job's pip packages and activated (it inherits the packages of the
    interpreter Ray runs under), else `python` when none is active. With `fallback`, `python` is
    tried first and the head's Ray interpreter taken when no such file is there: an address that
    looks local may be a tunnel to another machine (`kubectl port-forward`, `ssh -L`). Unless it is
    this very interpreter (which runs marin) without `fallback` or `pip`, the job checks its
    interpreter first: one without marin installed ends the job with one line naming it and
    `--python`."""
    if python == sys.executable and not fallback and not pip:
        return shlex.join([python, *argv])
    in_job_env = 'py="${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python}"; '  # Ray's virtualenv of the --pip packages
    find_ray = in_job_env if pip else "py=; " + _FIND_RAY_PYTHON
    if python == CLUSTER_PYTHON:
        find = find_ray
    elif pip:
        find = f'{in_job_env}[ -n "$py" ] || py={shlex.quote(python)}; '
    elif fallback:
        find = f'py={shlex.quote(python)}; [ -x "$py" ] || {{ {find_ray}}}; '
    else:
        find = f"py={shlex.quote(python)}; "
    why = (
        "marin submit: the job's python ($py) cannot import an installed marin on this node; "
        "pass --python /path/to/bin/python, an interpreter of the cluster's nodes that has marin installed"
    )
    return (
        f'{find}py="${{py:-python}}"; "$py" -c {shlex.quote(_HAS_MARIN)} 2>/dev/null || '
        f'{{ echo "{why}" >&2; exit 1; }}; exec "$py" {shlex.join(argv)}'
    )


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
