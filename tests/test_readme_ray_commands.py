"""The README's Ray commands, run verbatim from a fresh copy of the project in a fresh environment.

The environment has no RAY_* variables and a PATH without the virtualenv (so the head's `python` is
not the venv's, as when a user types `.venv/bin/ray start`), and a home whose ~/.ray/auth_token
exists, as it does after any local `ray.init()`: then `ray start --head` turns token authentication
on, which the README never mentions. The head uses Ray's default ports (6379, 8265, 10001, 52365): the
test waits its turn for them (tests/ports.py). Every Ray process the commands start lives under this
test's own TMPDIR and is killed by pid at the end (never `ray stop`).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from ports import fixed_ports
from ray_nodes import LocalRayCluster

from tests.shell_env import fresh_project_copy

# The fixed ports' tests run on one pytest-xdist worker, one after another (docs/testing.md).
pytestmark = [pytest.mark.timeout(1500), pytest.mark.xdist_group("fixed-ports"), pytest.mark.call_limit(240)]

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## From a laptop to a Ray cluster"


def readme_ray_commands() -> list[str]:
    """The lines of the bash block in the README's Ray section."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index(SECTION) :]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


def test_the_readme_ray_commands_run_verbatim_in_a_fresh_environment(tmp_path):
    start, run_on_ray, submit = readme_ray_commands()
    assert [start, run_on_ray, submit] == [
        ".venv/bin/ray start --head --port=6379 --dashboard-host=127.0.0.1",
        "MARIN_CLUSTER=ray RAY_ADDRESS=127.0.0.1:6379 .venv/bin/python experiments/tutorials/demo.py",
        ".venv/bin/marin submit --address http://127.0.0.1:8265 experiments/tutorials/demo.py",
    ]
    assert start.startswith(".venv/bin/ray start --head") and "MARIN_CLUSTER=ray" in run_on_ray
    assert submit.startswith(".venv/bin/marin submit")
    with fixed_ports(*RAY_DEFAULT_PORTS):
        _run_the_commands(start, run_on_ray, submit, tmp_path)


# The head's GCS, dashboard, client server and dashboard agent, on Ray's defaults.
RAY_DEFAULT_PORTS = (6379, 8265, 10001, 52365)


def _run_the_commands(start: str, run_on_ray: str, submit: str, tmp_path: Path) -> None:
    project = tmp_path / "marin"
    project.mkdir()
    fresh_project_copy(project)
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    token = subprocess.run(
        [
            sys.executable,
            "-c",
            "from ray._private.authentication.authentication_token_generator import "
            "generate_new_authentication_token as g; print(g())",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (home / ".ray" / "auth_token").write_text(token)
    ray_tmp = tempfile.mkdtemp(prefix="rdme-", dir="/tmp")  # short: Ray's socket paths are length-limited
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "TMPDIR": ray_tmp,
        "LANG": "C.UTF-8",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        # The demo's training, shortened (docs/testing.md); the quickstart's slow-tier test trains it in full.
        "MARIN_DEMO_TRAIN_STEPS": "4",
    }
    assert not any(k.startswith("RAY_") for k in env)
    head = LocalRayCluster(temp_dir=ray_tmp)  # only to find and kill what the commands started

    def sh(line: str, timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", "-c", line], cwd=project, env=env, capture_output=True, text=True, timeout=timeout
        )

    try:
        started = sh(start, 180)
        assert started.returncode == 0, started.stdout + started.stderr
        assert "Token authentication is enabled" in started.stderr + started.stdout

        ran = sh(run_on_ray, 900)
        assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-5000:]
        assert "InvalidAuthToken" not in ran.stderr
        # The training step ran as a Ray task, its progress bar shown here as it ran.
        progress = [
            line
            for line in ran.stderr.splitlines()
            if "(checkpoints/marin-nano-tinystories pid=" in line and "train:" in line
        ]
        assert progress, ran.stderr[-5000:]
        outputs = project / "marin-outputs"
        [model] = outputs.glob("checkpoints/marin-nano-tinystories-*")
        assert (model / "hf" / "config.json").exists()
        # docs/clusters.md's other way to run it on the cluster: every step is found cached there.
        alternative = ".venv/bin/marin run experiments/tutorials/demo.py --cluster ray:127.0.0.1:6379"
        assert f"# or: {alternative}" in (ROOT / "docs" / "clusters.md").read_text()
        again = sh(alternative, 600)
        assert (
            again.returncode == 0 and f"4 steps under {outputs}: 4 cached" in again.stdout + again.stderr
        ), again.stdout[-3000:] + again.stderr[-3000:]

        submitted = sh(submit, 300)
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        job_id = submitted.stdout.splitlines()[0]
        # No --prefix: the outputs go where the submitter's own runs put them, said so on stderr.
        assert f"warning: outputs go to {outputs}" in submitted.stderr
        follow = sh(f".venv/bin/marin jobs logs {job_id} --follow --address http://127.0.0.1:8265", 900)
        assert follow.returncode == 0, follow.stderr
        # The job's interpreter is the venv's (the head's PATH has none), so its packages import.
        entry = re.search(
            rf"Running entrypoint for job {job_id}: py=(\S+); .* exec \"\$py\" experiments/tutorials/demo.py",
            follow.stdout,
        )
        assert entry and Path(entry.group(1)).samefile(project / ".venv" / "bin" / "python"), follow.stdout[
            -3000:
        ]
        assert "ModuleNotFoundError" not in follow.stdout
        listed = sh(".venv/bin/marin jobs list --address http://127.0.0.1:8265", 120)
        assert f"{job_id}\tSUCCEEDED" in listed.stdout, listed.stdout + listed.stderr + follow.stdout[-3000:]
        stopped = sh(f".venv/bin/marin jobs stop {job_id} --address http://127.0.0.1:8265", 120)
        assert f"job {job_id}: already finished" in stopped.stdout, stopped.stdout + stopped.stderr
        # Every step was already done by the run above: the job found them in the same prefix.
        assert f"4 steps under {outputs}: 4 cached" in follow.stdout, follow.stdout[-3000:]
    finally:
        head.stop()
