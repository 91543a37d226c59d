"""The click commands `marin submit` and `marin jobs list|logs|stop`, each failing with one line."""

from __future__ import annotations

import functools
import os
import sys

import click

from marin.submit.client import ADDRESS_ENV, DEFAULT_ADDRESS, SubmitError, _address, _client, _why
from marin.submit.jobs import job_status, list_jobs, submit, write_logs
from marin.submit.package import JobRequest, git_snapshot
from marin.submit.placement import count_machines, interpreter_for, resolve_prefix


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
    help=(
        "The job's interpreter on the head: a path, or `cluster` for the one its Ray runs under, found "
        "there (default: this one for a head on this machine, else `cluster`)."
    ),
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
        python_fallback=python is None,  # a "local" address may be a tunnel to another machine
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
