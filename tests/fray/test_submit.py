"""`marin submit` sends a whole experiment to a real Ray head through the Jobs API."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap

import pytest

from marin.execution.run_provenance import git_state
from marin.submit import (
    CLUSTER_PYTHON,
    JobRequest,
    SubmitError,
    git_snapshot,
    interpreter_for,
    is_local_address,
    resolve_prefix,
)

pytestmark = pytest.mark.timeout(240)

MARIN = [sys.executable, "-m", "marin.cli"]

EXPERIMENT = textwrap.dedent("""
    import os
    from pathlib import Path

    from fray.cluster import ResourceConfig
    from marin.execution.step_runner import StepRunner
    from marin.execution.step_spec import StepSpec


    def hello(path):
        import ray

        Path(path, "hello.txt").write_text("hi")
        return {"in_ray_worker": ray.is_initialized(), "cluster": os.environ.get("MARIN_CLUSTER")}


    step = StepSpec(name="hello", fn=hello, resources=ResourceConfig.with_cpu(1))

    if __name__ == "__main__":
        import sys

        print("shipped files:", sorted(os.listdir(".")))
        print("driver python:", sys.executable)
        StepRunner().run([step])
""")


def test_request_packages_the_working_directory_without_venv_outputs_or_git(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "exp.py").write_text("print(1)")
    request = JobRequest(
        str(tmp_path / "exp.py"),
        str(tmp_path),
        ["--lr", "3e-4"],
        prefix="gs://bucket/marin",
        python=sys.executable,
    )
    assert request.entrypoint() == f"{sys.executable} exp.py --lr 3e-4"
    env = request.runtime_env()
    assert env["working_dir"] == os.path.realpath(tmp_path)
    assert {".venv", ".git", "marin-outputs"} <= set(env["excludes"])
    assert env["env_vars"] == {
        "MARIN_CLUSTER": "ray",
        "MARIN_PREFIX": "gs://bucket/marin",
        "PYTHONPATH": "src",
        # `ray job stop` waits longer than the runner gives its steps to checkpoint (Ray's default: 3 s)
        "RAY_JOB_STOP_WAIT_TIME_S": "75",
    }
    outside = tmp_path.parent / "elsewhere.py"
    outside.write_text("")
    with pytest.raises(SubmitError, match="is outside the working directory"):
        JobRequest(str(outside), str(tmp_path)).entrypoint()


def _git(project, *args):
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=project,
        check=True,
        capture_output=True,
    )


def test_submit_runs_the_experiment_as_a_ray_job_whose_steps_are_ray_tasks(ray_nodes, tmp_path):
    project = tmp_path / "project"
    (project / ".venv").mkdir(parents=True)
    (project / ".venv" / "big.bin").write_bytes(b"0" * 1024)
    (project / ".gitignore").write_text(".venv\n")
    (project / "experiment.py").write_text(EXPERIMENT)
    _git(project, "init", "-q")
    _git(project, "add", ".")
    _git(project, "commit", "-qm", "experiment")
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=project, capture_output=True, text=True
    ).stdout.strip()
    (project / "experiment.py").write_text(EXPERIMENT + "# an uncommitted change\n")
    prefix = tmp_path / "outputs"
    env = {**os.environ, "MARIN_CLUSTER": ""}
    done = subprocess.run(
        [
            *MARIN,
            "submit",
            "--address",
            ray_nodes.dashboard_url,
            "--prefix",
            str(prefix),
            "--follow",
            "experiment.py",
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    job_id = done.stdout.splitlines()[0]
    assert "shipped files: ['.gitignore', 'experiment.py']" in done.stdout  # .venv and .git stayed home
    assert (
        f"driver python: {sys.executable}" in done.stdout
    )  # the submitter's interpreter, the head being local
    assert f"job {job_id}: SUCCEEDED" in done.stderr
    [out] = prefix.glob("hello-*")
    assert json.loads((out / ".executor_status").read_text())["state"] == "SUCCESS"
    result = json.loads((out / ".artifact.json").read_text())["result"]
    assert result == {"in_ray_worker": True, "cluster": "ray"}
    # The experiment's git state, though .git was not shipped: in the step's record and the job's metadata.
    recorded = json.loads((out / ".executor_info").read_text())["git"]["experiment"]
    assert (recorded["commit"], recorded["dirty"]) == (commit, True)
    assert "+# an uncommitted change" in recorded["diff"]
    from ray.job_submission import JobSubmissionClient

    metadata = JobSubmissionClient(ray_nodes.dashboard_url).get_job_info(job_id).metadata
    assert (metadata["git_commit"], metadata["git_dirty"]) == (commit, "True")
    listed = subprocess.run(
        [*MARIN, "jobs", "list", "--address", ray_nodes.dashboard_url],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert f"{job_id}\tSUCCEEDED\t{sys.executable} experiment.py" in listed.stdout
    logs = subprocess.run(
        [*MARIN, "jobs", "logs", job_id, "--address", ray_nodes.dashboard_url],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "shipped files:" in logs.stdout


def test_a_node_local_prefix_is_refused_across_machines_and_allowed_with_a_warning_on_one(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MARIN_PREFIX", raising=False)
    assert resolve_prefix("gs://bucket/marin", machines=3) == ("gs://bucket/marin", None)
    for prefix in (None, "outputs", str(tmp_path / "outputs")):
        with pytest.raises(SubmitError, match=r"on 2 machines.*--prefix gs://BUCKET/marin"):
            resolve_prefix(prefix, machines=2)
    chosen, warning = resolve_prefix(None, machines=1)
    assert chosen == str(tmp_path / "marin-outputs")  # where the submitter looks, not Ray's session folder
    assert warning.startswith(f"warning: outputs go to {tmp_path / 'marin-outputs'}")
    assert resolve_prefix("rel", machines=1)[0] == str(tmp_path / "rel")


def test_git_snapshot_records_commit_and_uncommitted_diff_and_git_state_reads_it_back(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "exp.py").write_text("x = 1\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "c")
    assert git_snapshot(str(repo))["dirty"] is False
    (repo / "exp.py").write_text("x = 2\n")
    snap = git_snapshot(str(repo))
    assert snap["dirty"] is True and "+x = 2" in snap["diff"] and len(snap["commit"]) == 40
    assert git_snapshot(str(tmp_path)) is None  # not a repository
    request = JobRequest(str(repo / "exp.py"), str(repo), git=snap)
    assert request.metadata()["git_commit"] == snap["commit"]
    # On the cluster: the shipped directory has no .git, so the submitted state stands for it.
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    monkeypatch.chdir(shipped)
    monkeypatch.setenv("MARIN_SUBMIT_GIT", request.runtime_env()["env_vars"]["MARIN_SUBMIT_GIT"])
    state = git_state(lambda: None)
    assert state["experiment"]["commit"] == snap["commit"] and state["experiment"]["diff"] == snap["diff"]


def test_a_remote_heads_job_finds_the_python_its_ray_runs_under_on_the_head(tmp_path):
    (tmp_path / "exp.py").write_text("")
    assert interpreter_for("http://127.0.0.1:8265") == sys.executable
    assert interpreter_for("http://203.0.113.7:8265") == CLUSTER_PYTHON  # TEST-NET-3: never this machine's
    request = JobRequest(str(tmp_path / "exp.py"), str(tmp_path), ["--n", "2"])
    assert request.python == CLUSTER_PYTHON and "--python_worker_command=" in request.entrypoint()
    assert request.entrypoint().endswith('exec "$py" exp.py --n 2')
    assert request.metadata()["command"] == "<ray's python> exp.py --n 2"  # what `marin jobs list` shows
    with_pip = JobRequest(str(tmp_path / "exp.py"), str(tmp_path), pip=["lm-eval"]).entrypoint()
    assert with_pip.startswith(
        'py="${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python}"; '
    )  # the virtualenv Ray made and activated


def test_a_local_heads_job_with_pip_packages_runs_in_the_virtualenv_ray_made_for_them(tmp_path):
    import subprocess

    (tmp_path / "exp.py").write_text("")
    command = JobRequest(
        str(tmp_path / "exp.py"), str(tmp_path), python=sys.executable, pip=["lm-eval"]
    ).entrypoint()
    # What the job's shell runs, with Ray's virtualenv active (here: this interpreter's own venv) and
    # without one (the pip packages' virtualenv was not made: this interpreter, checked for marin).
    probe = command.replace("exp.py", "-c 'import sys; print(sys.executable)'")
    venv = os.path.dirname(os.path.dirname(sys.executable))
    for env, want in (({"VIRTUAL_ENV": venv}, f"{venv}/bin/python"), ({}, sys.executable)):
        done = subprocess.run(
            ["sh", "-c", probe], env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == want


WHICH_PYTHON = textwrap.dedent("""
    import sys

    import psutil  # a dependency of marin's: the module the bare `python` of a head lacked

    import marin

    print("driver python:", sys.executable, psutil.__name__, marin.__name__)
""")


def test_submit_with_a_decoy_python_on_path_runs_the_job_under_the_python_the_heads_ray_runs(
    ray_nodes, tmp_path
):
    from ray_nodes import decoy_python_dir

    project = tmp_path / "project"
    project.mkdir()
    (project / "which.py").write_text(WHICH_PYTHON)
    decoy = decoy_python_dir(str(tmp_path / "bin"))  # the head's nodes have one too (tests/conftest.py)
    env = {**os.environ, "MARIN_CLUSTER": "", "PATH": os.pathsep.join([decoy, os.environ["PATH"]])}

    def submit(python: str) -> subprocess.CompletedProcess:
        args = ["submit", "--address", ray_nodes.dashboard_url, "--prefix", str(tmp_path / "out")]
        return subprocess.run(
            [*MARIN, *args, "--python", python, "--follow", "which.py"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=200,
        )

    # `cluster`, what a head on another machine gets: the interpreter that ran `ray start` there.
    done = submit(CLUSTER_PYTHON)
    assert done.returncode == 0, done.stdout + done.stderr
    [line] = [x for x in done.stdout.splitlines() if x.startswith("driver python:")]
    python = line.split()[2]
    assert os.path.dirname(python) == os.path.dirname(sys.executable) and "psutil marin" in line  # the venv's
    # The head's bare `python` (the bug this replaces) is the decoy: the job fails with one clear line.
    failed = submit("python")
    assert failed.returncode == 1 and "SUCCEEDED" not in failed.stderr
    assert (
        "marin submit: the job's python (python) cannot import an installed marin on this node; pass "
        "--python /path/to/bin/python" in failed.stdout
    ), failed.stdout
    assert "decoy" not in failed.stdout  # it never ran the experiment
    # An address that looks local may be a tunnel (kubectl port-forward) to a head where this
    # interpreter is no file: the job then takes the head's Ray interpreter.
    from marin.submit import job_status, submit, write_logs

    tunnelled = JobRequest(
        str(project / "which.py"),
        str(project),
        python=str(tmp_path / "elsewhere" / "python"),
        python_fallback=True,
    )
    job_id = submit(tunnelled, ray_nodes.dashboard_url)
    logs = io.StringIO()
    write_logs(job_id, logs, ray_nodes.dashboard_url, follow=True)
    assert job_status(job_id, ray_nodes.dashboard_url) == "SUCCEEDED", logs.getvalue()
    assert f"driver python: {python} psutil marin" in logs.getvalue()


def test_only_loopback_or_own_addresses_are_local():
    assert is_local_address("http://127.0.0.1:8265")
    assert is_local_address("http://localhost:8265")
    assert not is_local_address("http://203.0.113.7:8265")  # TEST-NET-3: never this machine's


def test_jobs_commands_print_one_line_errors_not_tracebacks(ray_nodes, tmp_path):
    home = tmp_path / "home"  # no ~/.ray/auth_token here, and no RAY_AUTH_MODE
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")} | {"HOME": str(home)}
    cases = [
        (["jobs", "list", "--address", ray_nodes.dashboard_url], "requires its auth token"),
        (["jobs", "logs", "raysubmit_nope", "--address", ray_nodes.dashboard_url], "requires its auth token"),
        (["jobs", "stop", "raysubmit_nope", "--address", "http://127.0.0.1:9"], "nothing answers there"),
    ]
    for args, why in cases:
        done = subprocess.run([*MARIN, *args], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 1, done.stderr
        assert "Traceback" not in done.stderr
        errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and why in errors[0], done.stderr
