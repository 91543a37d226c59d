"""An experiment outside any git checkout: its steps' records say so once ("not a git checkout"),
`marin info` shows it, and nothing of git reaches the terminal."""

from __future__ import annotations

import json
import os
import subprocess
import sys

STEP = 'from marin.execution.step_spec import StepSpec\n\nstep = StepSpec(name="x", fn=lambda: {"n": 1})\n'


def test_a_run_outside_a_checkout_records_it_once_and_prints_no_git_error(tmp_path):
    (tmp_path / "exp.py").write_text(STEP)
    probe = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True)
    assert probe.returncode != 0  # the folder is in no repository
    env = {k: v for k, v in os.environ.items() if k != "MARIN_CLUSTER"}
    done = subprocess.run(
        [sys.executable, "-m", "marin.cli", "run", "exp.py", "--prefix", "out"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "fatal" not in done.stdout + done.stderr
    (output,) = (tmp_path / "out").glob("x-*")
    git = json.loads((output / ".executor_info").read_text())["git"]
    assert git["experiment"]["note"] == "not a git checkout" and git["experiment"]["commit"] is None
    assert json.dumps(git).count("not a git checkout") == 1
    info = subprocess.run(
        [sys.executable, "-m", "marin.cli", "info", str(output)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert "exp git  not a git checkout" in info.stdout, info.stdout + info.stderr
