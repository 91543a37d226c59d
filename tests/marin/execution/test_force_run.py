"""Which earlier attempt a resumable step resumes from: an interrupted one, or a failed one that
force_run_failed retries; a step named in force_run always starts clean."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

# A runner process with one resumable step that writes three atomic units, skipping those it finds,
# and returns the units it found. MODE=hang stops it after the first unit, MODE=fail fails it there.
# `python script.py PREFIX (run|plan) [force_run] [force_run_failed]`.
SCRIPT = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    from fray.cluster import ThreadCluster
    from marin.execution.step_runner import StepRunner
    from marin.execution.step_spec import StepSpec

    def units(path):
        found = sorted(p.name for p in Path(path).glob("unit-*"))
        for i in range(3):
            unit = Path(path, f"unit-{i}")
            if not unit.exists():
                Path(path, "unit.tmp").write_text(f"unit {i} by {os.getpid()}")
                os.replace(Path(path, "unit.tmp"), unit)
            if i == 0 and os.environ.get("MODE") == "hang":
                Path(os.environ["STARTED"]).write_text("1")
                time.sleep(600)
            if i == 0 and os.environ.get("MODE") == "fail":
                raise RuntimeError("fails after its first unit")
        return {"found": found}

    prefix, what, *flags = sys.argv[1:]
    step = StepSpec(name="units", fn=units, version="1", resumable=True)
    runner = StepRunner(prefix=prefix, cluster=ThreadCluster(), progress=False)
    force_run = ["units"] if "force_run" in flags else []
    if what == "plan":
        print(json.dumps(runner.plan([step], force_run=force_run,
                                     force_run_failed="force_run_failed" in flags).of(step).to_json()))
    else:
        runner.run([step], force_run=force_run, force_run_failed="force_run_failed" in flags)
""")


def _runner(tmp_path, *args, mode="", wait=True):
    script = tmp_path / "units.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "MODE": mode, "STARTED": str(tmp_path / "started")}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "prefix"), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if not wait:
        return proc
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def _output(tmp_path):
    (out,) = (tmp_path / "prefix").glob("units-*")
    return out


def _found(tmp_path):
    return json.loads((_output(tmp_path) / ".artifact.json").read_text())["result"]["found"]


def _plan(tmp_path, *flags):
    code, out, err = _runner(tmp_path, "plan", *flags)
    assert code == 0, err
    return json.loads(out)


def _interrupt(tmp_path):
    proc = _runner(tmp_path, "run", mode="hang", wait=False)
    deadline = time.monotonic() + 60
    while not (tmp_path / "started").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the step never started"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert json.loads((_output(tmp_path) / ".executor_status").read_text())["state"] == "RUNNING"


def test_force_run_gives_an_interrupted_resumable_step_a_clean_start(tmp_path):
    _interrupt(tmp_path)
    assert "resumes" in _plan(tmp_path)["reason"]
    planned = _plan(tmp_path, "force_run")
    assert planned["state"] == "run: forced" and "starts clean" in planned["reason"]

    code, _, err = _runner(tmp_path, "run", "force_run")
    assert code == 0, err
    assert _found(tmp_path) == []  # the killed attempt's unit was cleared, not resumed
    assert not list(_output(tmp_path).parent.glob("*.superseded-*"))  # nothing finished to keep aside


def test_an_interrupted_resumable_step_resumes_without_force_run(tmp_path):
    _interrupt(tmp_path)
    code, _, err = _runner(tmp_path, "run")
    assert code == 0, err
    assert _found(tmp_path) == ["unit-0"]


def test_a_failed_resumable_step_resumes_when_force_run_failed_retries_it(tmp_path):
    code, _, _ = _runner(tmp_path, "run", mode="fail")
    assert code != 0
    assert _plan(tmp_path)["state"] == "blocked"
    planned = _plan(tmp_path, "force_run_failed")
    assert planned["state"] == "run: retry" and "resumes" in planned["reason"]

    code, _, err = _runner(tmp_path, "run", "force_run_failed")
    assert code == 0, err
    assert _found(tmp_path) == ["unit-0"]


def test_force_run_gives_a_failed_resumable_step_a_clean_start(tmp_path):
    code, _, _ = _runner(tmp_path, "run", mode="fail")
    assert code != 0
    planned = _plan(tmp_path, "force_run", "force_run_failed")
    assert planned["state"] == "run: forced" and "starts clean" in planned["reason"]

    code, _, err = _runner(tmp_path, "run", "force_run", "force_run_failed")
    assert code == 0, err
    assert _found(tmp_path) == []
