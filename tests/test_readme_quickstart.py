"""The README's quickstart and `marin` commands, run verbatim in a fresh copy of the project.

A fresh copy (the files a clone has, and this .venv), a shell environment without MARIN_*/RAY_*
variables: `marin plan` first (nothing is cached), then `bash scripts/demo.sh` runs the whole demo
once, after which `marin run` finds every step cached and `marin status`, `marin info` and `marin gc`
read the outputs it left in ./marin-outputs. The default tier trains the demo's model for a few steps
(`MARIN_DEMO_TRAIN_STEPS`, docs/testing.md); the slow tier runs it at its full 100 steps.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.shell_env import ROOT, fresh_project_copy, shell_without_venv

pytestmark = pytest.mark.timeout(1800)


def _bash_block(section: str, index: int = 0) -> list[str]:
    """The commands (comments dropped) of the `index`-th ```bash block under README's `section` heading."""
    text = (ROOT / "README.md").read_text()
    text = text[text.index(section) :]
    block = re.findall(r"```bash\n(.*?)```", text, re.S)[index]
    return [re.sub(r"\s+#\s.*$", "", line).strip() for line in block.splitlines() if line.strip()]


@pytest.mark.parametrize(
    "train_steps",
    [pytest.param("4", id="reduced"), pytest.param(None, marks=pytest.mark.slow, id="full-size")],
)
def test_the_readme_quickstart_and_marin_commands_run_verbatim(tmp_path, train_steps):
    assert _bash_block("## Quickstart")[0] == "bash scripts/demo.sh"
    activate, plan, run, status, info, gc = _bash_block("## The `marin` commands")
    assert [activate, plan, run, status, info, gc] == [
        "source .venv/bin/activate",
        "marin plan experiments/tutorials/demo.py",
        "marin run experiments/tutorials/demo.py",
        "marin status marin-outputs",
        "marin info checkpoints/marin-nano-tinystories",
        "marin gc marin-outputs",
    ]
    stamp = ROOT / ".venv" / ".marin-installed"
    if not stamp.exists() or (ROOT / "pyproject.toml").stat().st_mtime > stamp.stat().st_mtime:
        pytest.fail(
            ".venv is older than pyproject.toml: run `bash scripts/setup.sh` first (the demo would "
            "reinstall marin into it from this test's temporary copy)"
        )
    project = tmp_path / "marin"
    fresh_project_copy(project)
    # A new shell: nothing of the venv on PATH; each `marin` line runs after the README's activation.
    env = shell_without_venv(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if train_steps:
        env["MARIN_DEMO_TRAIN_STEPS"] = train_steps

    def sh(line: str, timeout: float = 300) -> str:
        if line.startswith("marin "):
            line = f"{activate} && {line}"
        done = subprocess.run(
            ["bash", "-c", line], cwd=project, env=env, capture_output=True, text=True, timeout=timeout
        )
        assert done.returncode == 0, (line, done.stdout[-3000:], done.stderr[-5000:])
        return done.stdout + done.stderr

    planned = sh(plan)
    assert re.search(r"run: new +│ checkpoints/marin-nano-tinystories ", planned), planned
    assert not (project / "marin-outputs").exists()  # planning writes nothing

    demo = sh("bash scripts/demo.sh", timeout=1500)
    for label in ("final training loss", "unigram entropy", "evaluation               bpb = "):
        assert label in demo, demo[-3000:]

    rerun = sh(run)
    assert re.search(r"(\d+) steps under .*: \1 cached", rerun), rerun[-3000:]
    # demo.sh passes its arguments to `marin run`: a rerun with one reuses every step, and still reports
    again = sh("bash scripts/demo.sh --force-run-failed")
    assert re.search(r"(\d+) steps under .*: \1 cached", again) and "final training loss" in again, again
    shown = sh(status)
    assert "SUCCESS" in shown and "checkpoints/marin-nano-tinystories" in shown
    for headline in ("final_loss = ", "bpb = ", "tokens = ", "vocab_size = "):  # one per kind of output
        assert headline in shown, shown
    (model,) = (project / "marin-outputs" / "checkpoints").glob("marin-nano-tinystories-*")
    explained = sh(info)
    assert "checkpoints/marin-nano-tinystories" in explained and "learning_rate" in explained, explained
    listed = sh(gc)
    assert "would delete 0 folder(s)" in listed and (model / "hf" / "config.json").exists()
