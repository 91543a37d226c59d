"""Git provenance: a library step records marin's repository and, beside it, the experiment's."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import marin.execution

MARIN_REPO = Path(marin.execution.__file__).resolve().parent

# A library step: its fn lives in marin, not in the experiment's repository.
EXPERIMENT = textwrap.dedent("""
    import sys
    import storage
    from marin.execution.step_runner import StepRunner
    from marin.execution.step_spec import StepSpec

    library_step = StepSpec(name="library-step", fn=storage.makedirs)
    if __name__ == "__main__":
        StepRunner(prefix=sys.argv[1], progress=False).run([library_step])
""")


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def _experiment_repo(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "experiment-repo"
    repo.mkdir()
    (repo / "exp.py").write_text(EXPERIMENT)
    _git(repo, "init", "-q")
    _git(repo, "add", "exp.py")
    _git(repo, "commit", "-q", "-m", "experiment")
    return repo, _git(repo, "rev-parse", "HEAD")


def _info(prefix: Path) -> dict:
    (info_file,) = prefix.glob("library-step-*/.executor_info")
    return json.loads(info_file.read_text())


def _marin_commit() -> str:
    return _git(MARIN_REPO, "rev-parse", "HEAD")


def test_script_run_records_the_experiment_repository_beside_marins(tmp_path):
    repo, commit = _experiment_repo(tmp_path)
    prefix = tmp_path / "out"
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    # Run from another directory: the experiment is found from __main__'s file, not the cwd.
    subprocess.run(
        [sys.executable, str(repo / "exp.py"), str(prefix)], cwd=elsewhere, check=True, timeout=120
    )
    git = _info(prefix)["git"]
    assert git["commit"] == _marin_commit()
    assert git["experiment"] == {"directory": str(repo), "commit": commit, "dirty": False}


def test_marin_run_records_the_imported_experiment_files_repository(tmp_path):
    repo, commit = _experiment_repo(tmp_path)
    (repo / "exp.py").write_text(EXPERIMENT + "\n# an uncommitted edit\n")
    prefix = tmp_path / "out"
    env = {**os.environ, "MARIN_PREFIX": ""}
    subprocess.run(
        [sys.executable, "-m", "marin.cli", "run", str(repo / "exp.py"), "--prefix", str(prefix)],
        cwd=tmp_path,
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    info = _info(prefix)
    git = info["git"]
    assert git["commit"] == _marin_commit()
    diff = _git(repo, "diff", "HEAD") + "\n"
    assert git["experiment"] == {
        "directory": str(repo),
        "commit": commit,
        "dirty": True,
        "repository": str(repo),
        "diff": diff,
        "diff_bytes": len(diff),
        "diff_truncated": False,
    }
    assert "+# an uncommitted edit" in diff
    exp_bytes = (repo / "exp.py").read_bytes()
    assert info["experiment"] == {
        "file": str(repo / "exp.py"),
        "sha256": hashlib.sha256(exp_bytes).hexdigest(),
    }
    assert info["command_line"]["argv"][1:] == ["run", str(repo / "exp.py"), "--prefix", str(prefix)]
    assert info["command_line"]["cwd"] == str(tmp_path)
    distributions = info["environment"]["distributions"]
    assert distributions["marin"] and distributions["orjson"] == importlib.metadata.version("orjson")
    shown = subprocess.run(
        [sys.executable, "-m", "marin.cli", "info", str(next(prefix.glob("library-step-*")))],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert f"exp git  {commit}  (dirty working tree)  in {repo}" in shown


def test_a_run_under_python_m_pytest_records_the_cwd_not_pytests_package(tmp_path):
    repo, commit = _experiment_repo(tmp_path)
    tests = repo / "tests"
    tests.mkdir()
    (tests / "test_exp.py").write_text(
        textwrap.dedent("""
        import os
        from exp import library_step
        from marin.execution.step_runner import StepRunner

        def test_runs():
            StepRunner(prefix=os.environ["PREFIX"], progress=False).run([library_step])
    """)
    )
    prefix = tmp_path / "out"
    env = {**os.environ, "PREFIX": str(prefix), "PYTHONPATH": str(repo)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_exp.py"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert _info(prefix)["git"]["experiment"] == {"directory": str(repo), "commit": commit, "dirty": False}


def test_the_experiment_directory_is_looked_up_again_until_the_experiment_is_imported(tmp_path):
    repo, _ = _experiment_repo(tmp_path)
    script = (
        "import sys\n"
        "from marin.execution.run_provenance import experiment_directory\n"
        "from marin.execution.discover import import_file\n"
        "print(experiment_directory())\n"
        "import_file(sys.argv[1])\n"
        "print(experiment_directory())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(repo / "exp.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert done.stdout.splitlines() == [str(tmp_path), str(repo)]


def test_a_dirty_experiments_diff_is_capped_and_says_so(tmp_path, monkeypatch):
    from marin.execution import run_provenance

    repo, _ = _experiment_repo(tmp_path)
    (repo / "exp.py").write_text(EXPERIMENT + "# edit\n" * 200)
    monkeypatch.setattr(run_provenance, "experiment_directory", lambda: str(repo))
    monkeypatch.setattr(run_provenance, "_git_cache", {})
    monkeypatch.setattr(run_provenance, "_diff_cache", {})
    monkeypatch.setattr(run_provenance, "GIT_DIFF_CAP", 300)
    experiment = run_provenance.git_state(run_provenance.git_state)["experiment"]
    assert experiment["dirty"] is True and experiment["repository"] == str(repo)
    assert len(experiment["diff"]) == 300 and experiment["diff"].startswith("diff --git a/exp.py b/exp.py")
    assert experiment["diff_truncated"] is True and experiment["diff_bytes"] > 200 * len("+# edit\n")
