"""docs/infra.md's commands that can run offline, run verbatim; the rest are marked untested there."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from marin.execution.status import STATUS_FILE

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "infra.md"


def _bash_lines() -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", DOC.read_text(), re.DOTALL)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def test_the_doc_calls_its_cloud_commands_untested():
    text = " ".join(DOC.read_text().split())
    assert "Neither `pulumi preview` nor `pulumi up` has been run against a real project" in text
    assert "## Bring it up (untested here: needs credentials and the pulumi CLI)" in text


def test_regenerate_command_reproduces_the_committed_manifest(tmp_path):
    (line,) = [line for line in _bash_lines() if "fray.kuberay" in line]
    assert line == "python -m fray.kuberay > deploy/kuberay-raycluster.yaml"
    (tmp_path / "deploy").mkdir()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    run = subprocess.run(
        ["bash", "-c", line], env=env, cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stderr
    committed = (ROOT / "deploy" / "kuberay-raycluster.yaml").read_text()
    assert (tmp_path / "deploy" / "kuberay-raycluster.yaml").read_text() == committed


def test_marin_gc_commands_list_then_delete_only_superseded_copies(tmp_path):
    gc_lines = [line for line in _bash_lines() if line.startswith("marin gc ")]
    assert [line.split("#")[0].strip() for line in gc_lines] == [
        'marin gc "$MARIN_PREFIX" --superseded --dry-run',
        'marin gc "$MARIN_PREFIX" --superseded',
    ]
    live = tmp_path / "tokenized" / "corpus-0123abcd"
    old = tmp_path / "tokenized" / "corpus-0123abcd.superseded-89abcdef-1764547200"
    for output in (live, old):
        output.mkdir(parents=True)
        (output / STATUS_FILE).write_text('{"state": "success"}')
        (output / "data.jsonl").write_text("{}\n")
    env = {
        **os.environ,
        "MARIN_PREFIX": str(tmp_path),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    dry = subprocess.run(["bash", "-c", gc_lines[0]], env=env, capture_output=True, text=True, check=False)
    assert dry.returncode == 0 and str(old) in dry.stdout + dry.stderr, dry.stderr
    assert live.exists() and old.exists()  # --dry-run deletes nothing
    delete = subprocess.run(["bash", "-c", gc_lines[1]], env=env, capture_output=True, text=True, check=False)
    assert delete.returncode == 0, delete.stderr
    assert live.exists() and not old.exists()
