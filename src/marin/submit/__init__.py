"""`marin submit` and `marin jobs`: run a whole experiment on a Ray cluster through the Ray Jobs API.

The working directory is packaged (minus the virtualenv, outputs and .git) and unpacked on the
cluster; the experiment file runs there as `PYTHON FILE.py`, with MARIN_CLUSTER=ray so every step
becomes a Ray task placed by its ResourceConfig. PYTHON is the submitter's own interpreter when the
head runs on this machine (and that file is there: a local address may be a tunnel), else the one
the head's Ray runs its workers under, found on the head when the job starts (a head started from
`.venv/bin/ray` has the system `python` on its PATH, without the venv's packages); `--python` names
another. The chosen interpreter is checked first: one without marin installed
fails the job with one line saying so. The experiment's git
state travels with the job (its metadata and $MARIN_SUBMIT_GIT, which each step's `.executor_info`
records). ray is imported only when one of these runs.

Modules: `client` (the Jobs API connection and its errors), `package` (what the job ships: the
working tree, its entrypoint and git state), `placement` (which interpreter and prefix suit the
cluster), `jobs` (submit, list, status, logs), `commands` (the click commands).
"""

from marin.submit.client import ADDRESS_ENV, DEFAULT_ADDRESS, SubmitError
from marin.submit.commands import jobs_group, submit_command
from marin.submit.jobs import job_status, list_jobs, submit, write_logs
from marin.submit.package import DEFAULT_EXCLUDES, JobRequest, git_snapshot
from marin.submit.placement import (
    CLUSTER_PYTHON,
    count_machines,
    interpreter_for,
    is_local_address,
    is_shared_storage,
    resolve_prefix,
)

__all__ = [
    "ADDRESS_ENV",
    "CLUSTER_PYTHON",
    "DEFAULT_ADDRESS",
    "DEFAULT_EXCLUDES",
    "JobRequest",
    "SubmitError",
    "count_machines",
    "git_snapshot",
    "interpreter_for",
    "is_local_address",
    "is_shared_storage",
    "job_status",
    "jobs_group",
    "list_jobs",
    "resolve_prefix",
    "submit",
    "submit_command",
    "write_logs",
]
