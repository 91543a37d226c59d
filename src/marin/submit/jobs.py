"""The jobs of a cluster: submit one, read its state, list them all, write their logs."""

from __future__ import annotations

import asyncio
from typing import Any, TextIO

from marin.submit.client import SubmitError, _address, _client, _why
from marin.submit.package import JobRequest


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
    """Every job the cluster knows, oldest first: id, status, entrypoint (a `marin submit` job's
    `command`), start time and message."""
    jobs = _client(address).list_jobs()
    rows = [
        {
            "id": job.submission_id or job.job_id,
            "status": str(job.status.value),
            # marin's own jobs as `PYTHON FILE ARGS`, not the shell that finds PYTHON on the head
            "entrypoint": (job.metadata or {}).get("command") or job.entrypoint,
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
