"""`marin submit` sends a whole experiment to a real Ray head through the Jobs API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from marin.submit import JobRequest, SubmitError

pytestmark = pytest.mark.timeout(240)

MARIN = [sys.executable, "-m", "marin.cli"]

EXPERIMENT = textwrap.dedent('''
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
        print("shipped files:", sorted(os.listdir(".")))
        StepRunner().run([step])
''')


def test_request_packages_the_working_directory_without_venv_outputs_or_git(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "exp.py").write_text("print(1)")
    request = JobRequest(str(tmp_path / "exp.py"), str(tmp_path), ["--lr", "3e-4"], prefix="gs://bucket/marin")
    assert request.entrypoint() == "python exp.py --lr 3e-4"
    env = request.runtime_env()
    assert env["working_dir"] == os.path.realpath(tmp_path)
    assert {".venv", ".git", "marin-outputs"} <= set(env["excludes"])
    assert env["env_vars"] == {"MARIN_CLUSTER": "ray", "MARIN_PREFIX": "gs://bucket/marin", "PYTHONPATH": "src"}
    outside = tmp_path.parent / "elsewhere.py"
    outside.write_text("")
    with pytest.raises(SubmitError, match="is outside the working directory"):
        JobRequest(str(outside), str(tmp_path)).entrypoint()


def test_submit_runs_the_experiment_as_a_ray_job_whose_steps_are_ray_tasks(ray_nodes, tmp_path):
    project = tmp_path / "project"
    (project / ".venv").mkdir(parents=True)
    (project / ".venv" / "big.bin").write_bytes(b"0" * 1024)
    (project / "experiment.py").write_text(EXPERIMENT)
    prefix = tmp_path / "outputs"
    env = {**os.environ, "MARIN_CLUSTER": ""}
    done = subprocess.run(
        [*MARIN, "submit", "--address", ray_nodes.dashboard_url, "--prefix", str(prefix), "--follow", "experiment.py"],
        cwd=project, env=env, capture_output=True, text=True, timeout=200,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    job_id = done.stdout.splitlines()[0]
    assert "shipped files: ['experiment.py']" in done.stdout  # .venv stayed home
    assert f"job {job_id}: SUCCEEDED" in done.stderr
    [out] = prefix.glob("hello-*")
    assert json.loads((out / ".executor_status").read_text())["state"] == "SUCCESS"
    result = json.loads((out / ".artifact.json").read_text())["result"]
    assert result == {"in_ray_worker": True, "cluster": "ray"}
    listed = subprocess.run([*MARIN, "jobs", "list", "--address", ray_nodes.dashboard_url], env=env,
                            capture_output=True, text=True, timeout=60, check=True)
    assert f"{job_id}\tSUCCEEDED\tpython experiment.py" in listed.stdout
    logs = subprocess.run([*MARIN, "jobs", "logs", job_id, "--address", ray_nodes.dashboard_url], env=env,
                          capture_output=True, text=True, timeout=60, check=True)
    assert "shipped files:" in logs.stdout
