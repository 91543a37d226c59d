"""An evaluation outside a git checkout prints no `fatal: not a git repository`: the harness's own
`git describe` (its errors on the terminal) is replaced by the experiment's commit, read quietly."""

from __future__ import annotations

import subprocess

from marin.evaluation.checkpoint import load_hf_model
from marin.evaluation.harness import harness_tasks, run_tasks, write_own_tasks


def test_the_harness_says_nothing_about_git_outside_a_checkout(
    tiny_export, stories, tmp_path, monkeypatch, capfd
):
    outside = tmp_path / "not-a-checkout"
    outside.mkdir()
    monkeypatch.chdir(outside)
    probe = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True)
    assert probe.returncode != 0 and "not a git repository" in probe.stderr  # git itself would say so
    tasks_dir = write_own_tasks(str(tmp_path / "harness"), stories, num_items=8)
    loaded = load_hf_model(tiny_export)
    capfd.readouterr()
    result = run_tasks(
        loaded.model, loaded.tokenizer, harness_tasks(("marin_story_endings",)), tasks_dir, batch_size=4
    )
    assert result["marin_story_endings"].metrics["acc"].n == 8
    captured = capfd.readouterr()
    assert "fatal" not in captured.err + captured.out
