"""docs/infra.md's commands that can run offline, run verbatim; the rest are marked untested there."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from pathlib import Path

from marin.execution.aside import ASIDE_RECORD

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


def _write_version(version: int, path: str) -> None:
    Path(path, "data.txt").write_text(f"v{version}\n" * 100)


def _prefix_with_garbage(prefix: Path) -> dict[str, list[Path]]:
    """A real prefix: three versions of a hashed step and a fixed-path step rerun with a new key."""
    from fray.cluster import ThreadCluster
    from marin.execution.step_runner import StepRunner
    from marin.execution.step_spec import StepSpec

    for version in (1, 2, 3):
        write = functools.partial(_write_version, version)
        steps = [
            StepSpec(name="corpus", fn=write, hash_attrs={"v": version}),
            StepSpec(name="pinned", fn=write, output_path="pinned", hash_attrs={"v": version}),
        ]
        StepRunner(prefix=str(prefix), cluster=ThreadCluster(), progress=False).run(steps)
    corpus = sorted(prefix.glob("corpus-*"), key=lambda p: (p / "data.txt").read_text())
    aside = [p for p in prefix.iterdir() if (p / ASIDE_RECORD).exists()]
    assert len(corpus) == 3 and len(aside) == 2
    return {"old": corpus[:2], "latest": corpus[2:], "aside": aside}


def test_marin_gc_commands_list_then_delete_moved_aside_copies_and_old_versions(tmp_path):
    gc_lines = [line for line in _bash_lines() if line.startswith("marin gc ")]
    assert [line.split("#")[0].strip() for line in gc_lines] == [
        'marin gc "$MARIN_PREFIX"',
        'marin gc "$MARIN_PREFIX" --keep-latest 2',
        'marin gc "$MARIN_PREFIX" --yes',
    ]
    prefix = tmp_path / "prefix"
    found = _prefix_with_garbage(prefix)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MARIN_", "RAY_"))}
    env.update(MARIN_PREFIX=str(prefix), PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")

    def run(line: str) -> str:
        done = subprocess.run(
            ["bash", "-c", line],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert done.returncode == 0, (line, done.stderr)
        return done.stdout

    listed = run(gc_lines[0])
    for path in found["old"] + found["aside"]:
        assert f"would delete {path} " in listed
    assert str(found["latest"][0]) not in listed and "would delete 4 folder(s)" in listed
    keep_two = run(gc_lines[1])
    assert f"would delete {found['old'][0]} " in keep_two and str(found["old"][1]) not in keep_two
    assert all(p.exists() for paths in found.values() for p in paths)  # listing deletes nothing
    deleted = run(gc_lines[2])
    assert "deleted 4 folder(s)" in deleted
    assert not any(p.exists() for p in found["old"] + found["aside"])
    assert (found["latest"][0] / "data.txt").exists() and (prefix / "pinned" / "data.txt").exists()
