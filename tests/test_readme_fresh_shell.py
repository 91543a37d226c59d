"""The README's `marin` commands work as written from a new shell after the quickstart: activating the
venv, as the README says, puts `marin` on PATH (without it, a new shell has no `marin`). A fresh copy
of the project, an environment without the venv on PATH; planning only, so it is quick (the full
walk through the commands, demo included, is tests/test_readme_quickstart.py)."""

from __future__ import annotations

import subprocess

import pytest

from tests.shell_env import fresh_project_copy, shell_without_venv

pytestmark = pytest.mark.timeout(300)


def test_a_new_shell_runs_the_readme_marin_commands_after_activating_the_venv(tmp_path):
    project = tmp_path / "marin"
    fresh_project_copy(project)
    env = shell_without_venv(HF_HUB_OFFLINE="1")

    def bash(line: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", "-c", line], cwd=project, env=env, capture_output=True, text=True, timeout=240
        )

    without = bash("marin plan experiments/tutorials/demo.py")
    assert (
        without.returncode == 127 and "marin: command not found" in without.stderr
    )  # why the README says to activate
    done = bash("source .venv/bin/activate && marin plan experiments/tutorials/demo.py")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "checkpoints/marin-nano-tinystories" in done.stdout + done.stderr
