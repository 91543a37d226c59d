"""What a job ships: the packaged working tree, the command it runs there, and its git state."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from marin.execution.interrupt import DEFAULT_STOP_GRACE_S
from marin.execution.run_provenance import SUBMITTED_GIT_ENV as GIT_ENV
from marin.submit.client import SubmitError
from marin.submit.placement import CLUSTER_PYTHON, job_command

_MAX_DIFF_CHARS = 64 * 1024  # one environment variable must stay well under Linux's 128 KiB
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


# How long `ray job stop` lets a job's runner stop its steps: their grace, its own margin, and time to exit.
JOB_STOP_WAIT_S = int(DEFAULT_STOP_GRACE_S) + 15


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
    python: str = CLUSTER_PYTHON
    git: Mapping[str, Any] | None = None
    python_fallback: bool = False  # the head's Ray interpreter when `python` is no file there

    def argv(self) -> list[str]:
        """FILE (relative to the working directory) and its arguments."""
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
        return [relative, *self.args]

    def entrypoint(self) -> str:
        """The shell command the job runs in the unpacked working directory (see `job_command`): an
        interpreter without marin installed fails the job with one line saying so, instead of a
        ModuleNotFoundError deep in the experiment."""
        return job_command(self.python, self.argv(), pip=bool(self.pip), fallback=self.python_fallback)

    def command(self) -> str:
        """The entrypoint as a person reads it: `PYTHON FILE ARGS` (`<ray's python>` for the cluster's)."""
        python = "<ray's python>" if self.python == CLUSTER_PYTHON else shlex.quote(self.python)
        return f"{python} {shlex.join(self.argv())}"

    def runtime_env(self) -> dict[str, Any]:
        """The Ray runtime_env: the packaged working directory, its src/ on the path, and env vars."""
        working = os.path.realpath(self.working_dir)
        # `ray job stop` SIGTERMs the runner and SIGKILLs it after this many seconds (Ray's default, 3,
        # would kill it while its steps finish their step and checkpoint within the runner's grace).
        env = {
            "MARIN_CLUSTER": "ray",
            "RAY_JOB_STOP_WAIT_TIME_S": str(JOB_STOP_WAIT_S),
            **dict(self.env_vars),
        }
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
        out = {"submitted_by": "marin submit", "file": self.file, "command": self.command()}
        if self.git is not None:
            out.update(
                {f"git_{k}": str(v) for k, v in self.git.items() if k in ("commit", "dirty", "diff_sha256")}
            )
        return out


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
