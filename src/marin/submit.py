"""`marin submit` and `marin jobs`: run a whole experiment on a Ray cluster through the Ray Jobs API.

The working directory is packaged (minus the virtualenv, outputs and .git) and unpacked on the
cluster; the experiment file runs there as `PYTHON FILE.py`, with MARIN_CLUSTER=ray so every step
becomes a Ray task placed by its ResourceConfig. PYTHON is the submitter's own interpreter when the
head runs on this machine (a head started from `.venv/bin/ray` has the system `python` on its
PATH), else the cluster's `python`. The experiment's git state travels with the job (its metadata
and $MARIN_SUBMIT_GIT, which each step's `.executor_info` records). ray is imported only when one
of these runs.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import ipaddress
import json
import os
import shlex
import socket
import subprocess
import sys
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import click

from marin.execution.errors import MarinError
from marin.execution.run_provenance import SUBMITTED_GIT_ENV as GIT_ENV

DEFAULT_ADDRESS = "http://127.0.0.1:8265"
ADDRESS_ENV = "RAY_API_SERVER_ADDRESS"
_MAX_DIFF_CHARS = 64 * 1024  # one environment variable must stay well under Linux's 128 KiB
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
DEFAULT_EXCLUDES = (
    ".venv",
    "venv",
    ".git",
    "marin-outputs",
    "outputs",
    "**/__pycache__",
    "*.pyc",
    ".pytest_cache",
)


class SubmitError(MarinError):
    """An experiment could not be submitted: a file outside the working directory, a bad option."""


@dataclass(frozen=True)
class JobRequest:
    """What to run on the cluster: FILE (inside `working_dir`) with `args`, and the job's environment."""

    file: str
    working_dir: str = "."
    args: Sequence[str] = ()
    prefix: str | None = None
    env_vars: Mapping[str, str] = field(default_factory=dict)
    excludes: Sequence[str] = ()
    pip: Sequence[str] = ()
    submission_id: str | None = None
    python: str = "python"
    git: Mapping[str, Any] | None = None

    def entrypoint(self) -> str:
        """The shell command the job runs, relative to the unpacked working directory."""
        working = os.path.realpath(self.working_dir)
        target = os.path.realpath(self.file)
        if not os.path.isfile(target):
            raise SubmitError(f"{self.file}: no such experiment file")
        relative = os.path.relpath(target, working)
        if relative.startswith(".."):
            raise SubmitError(
                f"{self.file} is outside the working directory {working}; run `marin submit` from the "
                "project root or pass --working-dir"
            )
        return shlex.join([self.python, relative, *self.args])

    def runtime_env(self) -> dict[str, Any]:
        """The Ray runtime_env: the packaged working directory, its src/ on the path, and env vars."""
        working = os.path.realpath(self.working_dir)
        env = {"MARIN_CLUSTER": "ray", **dict(self.env_vars)}
        if self.prefix:
            env["MARIN_PREFIX"] = self.prefix
        if self.git is not None:
            env[GIT_ENV] = json.dumps(dict(self.git), sort_keys=True)
        if os.path.isdir(os.path.join(working, "src")):
            # The submitted code, not whatever version the cluster's image holds.
            env["PYTHONPATH"] = "src"
        runtime_env: dict[str, Any] = {
            "working_dir": working,
            "excludes": [*DEFAULT_EXCLUDES, *self.excludes],
            "env_vars": env,
        }
        if self.pip:
            runtime_env["pip"] = list(self.pip)
        return runtime_env

    def metadata(self) -> dict[str, str]:
        """The job's Ray metadata (strings only): who submitted what, at which git state."""
        out = {"submitted_by": "marin submit", "file": self.file}
        if self.git is not None:
            out.update(
                {f"git_{k}": str(v) for k, v in self.git.items() if k in ("commit", "dirty", "diff_sha256")}
            )
        return out


def _address(address: str | None) -> str:
    return address or os.environ.get(ADDRESS_ENV) or DEFAULT_ADDRESS


def _client(address: str | None):
    from ray.job_submission import JobSubmissionClient

    from fray.cluster.ray_auth import use_token_if_available

    use_token_if_available()
    address = _address(address)
    try:
        return JobSubmissionClient(address)
    except Exception as exc:  # noqa: BLE001 - connection and authentication errors come in many types
        raise SubmitError(f"cannot use the Ray Jobs API at {address}: {_why(exc)}") from None


def _why(exc: BaseException) -> str:
    """One line saying what went wrong talking to the cluster, and what to do about it."""
    text = " ".join(str(exc).split())
    if "Authentication" in text or "Unauthorized" in text or "Forbidden" in text:
        return (
            "the cluster requires its auth token; copy the head's ~/.ray/auth_token to this machine "
            "(or set RAY_AUTH_TOKEN to its contents)"
        )
    if "Failed to connect" in text or "Connection refused" in text or "Cannot connect" in text:
        return (
            "nothing answers there; start a head with `.venv/bin/ray start --head --dashboard-host=127.0.0.1` "
            "or pass --address http://HEAD:8265"
        )
    return text[:300]


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


def git_snapshot(directory: str) -> dict[str, Any] | None:
    """The git state of `directory`'s repository: commit, dirty flag and the uncommitted diff of
    tracked files (cut at 64 KiB, its sha256 over the whole), or None outside a repository."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", directory, *args], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return None
    diff = git("diff", "HEAD") or ""
    return {
        "commit": commit.strip(),
        "dirty": bool(diff),
        "diff": diff[:_MAX_DIFF_CHARS],
        "diff_truncated": len(diff) > _MAX_DIFF_CHARS,
        "diff_sha256": hashlib.sha256(diff.encode()).hexdigest(),
        "source": "marin submit",
    }


def submit(request: JobRequest, address: str | None = None) -> str:
    """Submit the experiment as a Ray job; returns its submission id."""
    entrypoint = request.entrypoint()
    client = _client(address)
    try:
        return client.submit_job(
            entrypoint=entrypoint,
            runtime_env=request.runtime_env(),
            submission_id=request.submission_id,
            metadata=request.metadata(),
        )
    except Exception as exc:  # noqa: BLE001 - connection and authentication errors come in many types
        raise SubmitError(f"cannot submit to the Ray cluster at {_address(address)}: {_why(exc)}") from None


def job_status(job_id: str, address: str | None = None) -> str:
    """PENDING, RUNNING, STOPPED, SUCCEEDED or FAILED."""
    return str(_client(address).get_job_status(job_id).value)


def list_jobs(address: str | None = None) -> list[dict[str, Any]]:
    """Every job the cluster knows, oldest first: id, status, entrypoint, start time and message."""
    jobs = _client(address).list_jobs()
    rows = [
        {
            "id": job.submission_id or job.job_id,
            "status": str(job.status.value),
            "entrypoint": job.entrypoint,
            "start_time": job.start_time,
            "message": job.message or "",
        }
        for job in jobs
    ]
    return sorted(rows, key=lambda r: r["start_time"] or 0)


def write_logs(job_id: str, out: TextIO, address: str | None = None, follow: bool = False) -> None:
    """Write the job's logs to `out`; with `follow`, keep writing until the job ends."""
    client = _client(address)
    if not follow:
        out.write(client.get_job_logs(job_id))
        return

    async def tail() -> None:
        async for chunk in client.tail_job_logs(job_id):
            out.write(chunk)
            out.flush()

    asyncio.run(tail())


def _one_line_errors(command):
    """Report any failure of a `marin submit`/`marin jobs` command as one line on stderr, exit code 1."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit, KeyboardInterrupt):
            raise
        except SubmitError as exc:
            click.echo(f"error: {exc}", err=True)
        except Exception as exc:  # noqa: BLE001 - the user gets one line, not a traceback
            click.echo(f"error: {_why(exc)}", err=True)
        sys.exit(1)

    return wrapper


@click.command("submit", context_settings={"ignore_unknown_options": True})
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option(
    "--address", default=None, help=f"The Ray Jobs API (default: ${ADDRESS_ENV}, else {DEFAULT_ADDRESS})."
)
@click.option(
    "--working-dir", default=".", type=click.Path(exists=True, file_okay=False), help="Packaged and shipped."
)
@click.option(
    "--prefix", default=None, help="MARIN_PREFIX on the cluster: storage every node sees (gs://, s3://)."
)
@click.option("--env", "env", multiple=True, help="KEY=VALUE set for the job; repeatable.")
@click.option(
    "--exclude", multiple=True, help="Another path pattern to leave out of the package; repeatable."
)
@click.option("--pip", multiple=True, help="A pip requirement to install for the job; repeatable.")
@click.option("--job-id", default=None, help="The submission id (default: Ray picks one).")
@click.option(
    "--follow", is_flag=True, help="Stream the job's logs until it ends; exit 1 unless it succeeded."
)
@click.option(
    "--python",
    "python",
    default=None,
    help="The job's interpreter (default: this one for a head on this machine, else `python`).",
)
@_one_line_errors
def submit_command(
    file, args, address, working_dir, prefix, env, exclude, pip, job_id, follow, python
) -> None:
    """Run experiment FILE.py (with ARGS) on a Ray cluster as a Ray job."""
    env_vars = {}
    for item in env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--env")
        env_vars[key] = value
    where = _address(address)
    prefix, warning = resolve_prefix(prefix, count_machines(address))
    if warning:
        click.echo(warning, err=True)
    request = JobRequest(
        file,
        working_dir,
        args,
        prefix,
        env_vars,
        exclude,
        pip,
        job_id,
        python=python or interpreter_for(where),
        git=git_snapshot(os.path.realpath(working_dir)),
    )
    submitted = submit(request, address)
    click.echo(submitted)
    click.echo(
        f"submitted {file} as Ray job {submitted} to {where}\n"
        f"  follow:  marin jobs logs {submitted} --follow --address {where}\n"
        f"  status:  marin jobs list --address {where}\n"
        f"  stop:    marin jobs stop {submitted} --address {where}",
        err=True,
    )
    if follow:
        write_logs(submitted, sys.stdout, address, follow=True)
        status = job_status(submitted, address)
        click.echo(f"job {submitted}: {status}", err=True)
        sys.exit(0 if status == "SUCCEEDED" else 1)


@click.group("jobs")
def jobs_group() -> None:
    """The Ray jobs of a cluster: list them, read or follow their logs, stop one."""


_ADDRESS = click.option(
    "--address", default=None, help=f"The Ray Jobs API (default: ${ADDRESS_ENV}, else {DEFAULT_ADDRESS})."
)


@jobs_group.command("list")
@_ADDRESS
@_one_line_errors
def jobs_list(address) -> None:
    """One line per job: id, status, entrypoint."""
    for row in list_jobs(address):
        click.echo(f"{row['id']}\t{row['status']}\t{row['entrypoint']}\t{row['message']}")


@jobs_group.command("logs")
@click.argument("job_id")
@_ADDRESS
@click.option("--follow", is_flag=True, help="Keep streaming until the job ends.")
@_one_line_errors
def jobs_logs(job_id, address, follow) -> None:
    """Print the logs of job JOB_ID."""
    write_logs(job_id, sys.stdout, address, follow=follow)


@jobs_group.command("stop")
@click.argument("job_id")
@_ADDRESS
@_one_line_errors
def jobs_stop(job_id, address) -> None:
    """Stop job JOB_ID."""
    stopped = _client(address).stop_job(job_id)
    click.echo(f"job {job_id}: {'stopping' if stopped else 'already finished'}")
