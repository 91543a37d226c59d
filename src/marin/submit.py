"""`marin submit` and `marin jobs`: run a whole experiment on a Ray cluster through the Ray Jobs API.

The working directory is packaged (minus the virtualenv, outputs and .git) and unpacked on the
cluster; the experiment file runs there as `python FILE.py`, with MARIN_CLUSTER=ray so every step
becomes a Ray task placed by its ResourceConfig. ray is imported only when one of these runs.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import click

from marin.execution.errors import MarinError

DEFAULT_ADDRESS = "http://127.0.0.1:8265"
ADDRESS_ENV = "RAY_API_SERVER_ADDRESS"
DEFAULT_EXCLUDES = (".venv", "venv", ".git", "marin-outputs", "outputs", "**/__pycache__", "*.pyc", ".pytest_cache")


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
        return shlex.join(["python", relative, *self.args])

    def runtime_env(self) -> dict[str, Any]:
        """The Ray runtime_env: the packaged working directory, its src/ on the path, and env vars."""
        working = os.path.realpath(self.working_dir)
        env = {"MARIN_CLUSTER": "ray", **dict(self.env_vars)}
        if self.prefix:
            env["MARIN_PREFIX"] = self.prefix
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


def _client(address: str | None):
    from ray.job_submission import JobSubmissionClient

    address = address or os.environ.get(ADDRESS_ENV) or DEFAULT_ADDRESS
    try:
        return JobSubmissionClient(address)
    except Exception as exc:  # noqa: BLE001 - connection errors come in many types
        raise SubmitError(
            f"cannot reach the Ray Jobs API at {address}: {exc}; start a head with "
            "`ray start --head --dashboard-host=0.0.0.0` or pass --address http://HEAD:8265"
        ) from None


def submit(request: JobRequest, address: str | None = None) -> str:
    """Submit the experiment as a Ray job; returns its submission id."""
    entrypoint = request.entrypoint()
    return _client(address).submit_job(
        entrypoint=entrypoint,
        runtime_env=request.runtime_env(),
        submission_id=request.submission_id,
        metadata={"submitted_by": "marin submit", "file": request.file},
    )


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


@click.command("submit", context_settings={"ignore_unknown_options": True})
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("--address", default=None, help=f"The Ray Jobs API (default: ${ADDRESS_ENV}, else {DEFAULT_ADDRESS}).")
@click.option("--working-dir", default=".", type=click.Path(exists=True, file_okay=False), help="Packaged and shipped.")
@click.option("--prefix", default=None, help="MARIN_PREFIX on the cluster: storage every node sees (gs://, s3://).")
@click.option("--env", "env", multiple=True, help="KEY=VALUE set for the job; repeatable.")
@click.option("--exclude", multiple=True, help="Another path pattern to leave out of the package; repeatable.")
@click.option("--pip", multiple=True, help="A pip requirement to install for the job; repeatable.")
@click.option("--job-id", default=None, help="The submission id (default: Ray picks one).")
@click.option("--follow", is_flag=True, help="Stream the job's logs until it ends; exit 1 unless it succeeded.")
def submit_command(file, args, address, working_dir, prefix, env, exclude, pip, job_id, follow) -> None:
    """Run experiment FILE.py (with ARGS) on a Ray cluster as a Ray job."""
    env_vars = {}
    for item in env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--env")
        env_vars[key] = value
    request = JobRequest(file, working_dir, args, prefix, env_vars, exclude, pip, job_id)
    try:
        submitted = submit(request, address)
    except SubmitError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    where = address or os.environ.get(ADDRESS_ENV) or DEFAULT_ADDRESS
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


_ADDRESS = click.option("--address", default=None, help=f"The Ray Jobs API (default: ${ADDRESS_ENV}, else {DEFAULT_ADDRESS}).")


@jobs_group.command("list")
@_ADDRESS
def jobs_list(address) -> None:
    """One line per job: id, status, entrypoint."""
    for row in list_jobs(address):
        click.echo(f"{row['id']}\t{row['status']}\t{row['entrypoint']}\t{row['message']}")


@jobs_group.command("logs")
@click.argument("job_id")
@_ADDRESS
@click.option("--follow", is_flag=True, help="Keep streaming until the job ends.")
def jobs_logs(job_id, address, follow) -> None:
    """Print the logs of job JOB_ID."""
    write_logs(job_id, sys.stdout, address, follow=follow)


@jobs_group.command("stop")
@click.argument("job_id")
@_ADDRESS
def jobs_stop(job_id, address) -> None:
    """Stop job JOB_ID."""
    stopped = _client(address).stop_job(job_id)
    click.echo(f"job {job_id}: {'stopping' if stopped else 'already finished'}")
