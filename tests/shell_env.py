"""The environment a documented command runs in: a user's shell, not the test process's settings."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def fresh_env(**extra: str) -> dict[str, str]:
    """os.environ without inherited MARIN_* / RAY_* variables, this venv's bin/ first on PATH, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MARIN_", "RAY_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"
    env.update(extra)
    return env


def shell_without_venv(**extra: str) -> dict[str, str]:
    """A new shell's environment: `fresh_env` without this venv on PATH (nor VIRTUAL_ENV), as a user has
    it before activating the venv."""
    env = fresh_env(**extra)
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p and p != venv_bin)
    env.pop("VIRTUAL_ENV", None)
    return env


def fresh_project_copy(dest: Path) -> None:
    """The project's files as a clone would have them (tracked and not ignored) under `dest`, and its .venv."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    (dest / ".venv").symlink_to(ROOT / ".venv")
