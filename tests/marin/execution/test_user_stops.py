"""A stop never loses more than the step under way, on every path a user stops a run by.

Each test drives a public entry point as a terminal does, in its own process group: `marin run
exp.py` or `python exp.py`, a default-settings nano training (no checkpoint interval of its own),
stopped at a random step by Ctrl-C (SIGINT to the whole group), by SIGTERM to the runner alone, or,
on Ray, by the runner cancelling the step's Ray task. The stopped step finishes the step under way
and writes a checkpoint; `marin plan` says the rerun resumes from that step (asked once, after the
Ctrl-C on `marin run`: the plan reads only the stopped step's folder, whose status and checkpoint every
test checks); the rerun does, and its weights are bit-identical to those of one uninterrupted run
(shared by the module). The runs
share one prefix, where the tokenizer and token cache are made once; each training has a name of
its own (a name changes the key, not the weights).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

# One worker runs the module, in the suite's `ray` group (tests/scheduling.py): the Ray test's cluster is the
# suite's shared one, and the reference run below is made once for all four tests.
pytestmark = [pytest.mark.timeout(600), pytest.mark.xdist_group("ray"), pytest.mark.call_limit(180)]

STEPS = 120
EXPERIMENT = textwrap.dedent(f"""
    import os

    from marin.execution.step_runner import StepRunner
    from marin.experiment.data import tokenized, train_tokenizer
    from marin.experiment.train import train_lm
    from marin.training.models import LlamaConfig
    from marin.training.optim import AdamConfig

    bpe = train_tokenizer(name="tokenizers/stories", source="marin://tinystories-synth", vocab_size=384,
                          sample_count=300)
    stories = tokenized(name="tokenized/stories", source="marin://tinystories-synth", tokenizer=bpe,
                        sample_count=400)
    nano = train_lm(
        name=os.environ.get("RUN_NAME", "checkpoints/nano"),
        model=LlamaConfig(hidden_dim=32, intermediate_dim=64, num_layers=2, num_heads=4, num_kv_heads=2,
                          max_seq_len=64),
        optimizer=AdamConfig(learning_rate=3e-3, weight_decay=0.1),
        datasets={{stories: 1.0}},
        batch_size=4,
        seq_len=64,
        num_train_steps={STEPS},
    )

    if __name__ == "__main__":
        StepRunner().run([nano])
""")


def _env(prefix: Path, run_name: str, **extra: str) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name != "MARIN_CLUSTER"}  # a user's shell
    # One intra-op thread: on a shared machine torch's spinning thread pools make a tiny model's
    # steps a hundred times slower; the weights are the same at any thread count used alike.
    return {**env, "MARIN_PREFIX": str(prefix), "RUN_NAME": run_name, "OMP_NUM_THREADS": "1", **extra}


def _marin(folder: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "marin.cli", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _output(prefix: Path, run_name: str) -> Path:
    (folder,) = [
        p
        for p in (prefix / os.path.dirname(run_name)).iterdir()
        if p.name.startswith(f"{Path(run_name).name}-")
    ]
    return folder


def _weights(output: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(output / "hf" / "model.safetensors"))


@pytest.fixture(scope="session")
def experiment(tmp_path_factory) -> tuple[Path, dict]:
    """The experiment's folder (exp.py, the shared prefix `out`) and the weights of an uninterrupted run.
    Session-scoped: the Ray test runs among the shared cluster's users, the others after them, and
    a module fixture would be made again in between."""
    folder = tmp_path_factory.mktemp("stops")
    (folder / "exp.py").write_text(EXPERIMENT)
    prefix = folder / "out"
    done = _marin(folder, _env(prefix, "checkpoints/reference"), "run", "exp.py")
    assert done.returncode == 0, done.stderr[-3000:]
    return folder, _weights(_output(prefix, "checkpoints/reference"))


def _steps_logged(output: Path | None) -> int:
    try:
        with open(output / "metrics.jsonl") as f:
            return sum(1 for line in f if line.endswith("\n"))
    except (FileNotFoundError, TypeError):
        return 0


def _run_and_stop(folder: Path, env: dict[str, str], command: list[str], run_name: str, stop) -> tuple:
    """Start `command` in its own process group, and once its training logged a random step, `stop(proc)`;
    returns (the step it was stopped at, exit code, stderr, the train step's output folder)."""
    at = random.Random().randrange(5, STEPS - 60)
    prefix = Path(env["MARIN_PREFIX"])
    stderr_path = folder / f"{Path(run_name).name}.stderr"
    with open(stderr_path, "w") as stderr:
        proc = subprocess.Popen(
            command, cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True
        )
    output = None
    deadline = time.monotonic() + 240
    try:
        while _steps_logged(output) < at:
            assert proc.poll() is None, stderr_path.read_text()[-3000:]
            assert time.monotonic() < deadline, f"step {at} never came: {stderr_path.read_text()[-3000:]}"
            if output is None and (prefix / os.path.dirname(run_name)).is_dir():
                found = [
                    p
                    for p in (prefix / os.path.dirname(run_name)).iterdir()
                    if p.name.startswith(f"{Path(run_name).name}-")
                ]
                output = found[0] if found else None
            time.sleep(0.005)
        stop(proc)
        rc = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return at, rc, stderr_path.read_text(), output


def _check_resume(
    folder: Path, env: dict[str, str], output: Path, at: int, reference: dict, stderr: str, plan: bool = False
) -> None:
    """A checkpoint of a step at or after `at` is there, (with `plan`) `marin plan` says the rerun
    resumes from it, the rerun does, and ends with the reference's weights."""
    status = json.loads((output / ".executor_status").read_text())
    log = (output / ".executor_log").read_text()
    assert status["state"] == "INTERRUPTED", stderr[-3000:]
    checkpoints = os.listdir(output / "checkpoints") if (output / "checkpoints").is_dir() else []
    assert len(checkpoints) == 1, log[-3000:]  # the stop's own: none is due by time this soon
    (checkpoint,) = checkpoints
    step = int(checkpoint.split("-")[1])
    assert at <= step < STEPS, (at, step, stderr[-3000:])
    if plan:
        planned = _marin(folder, env, "plan", "exp.py", "--json")
        assert planned.returncode == 0, planned.stderr[-2000:]
        (train,) = [s for s in json.loads(planned.stdout)["steps"] if s["output_path"] == str(output)]
        assert train["state"] == "run: retry" and train["reason"].endswith(f"resumes from step {step}"), train
    rerun = _marin(folder, env, "run", "exp.py")
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    result = json.loads((output / ".artifact.json").read_text())["result"]
    assert result["resumed_from_step"] == step, result
    weights = _weights(output)
    assert weights.keys() == reference.keys()
    assert all(weights[n].equal(reference[n]) for n in reference), f"stopped after step {at}: weights differ"


def test_ctrl_c_on_marin_run_loses_at_most_the_step_under_way(experiment):
    folder, reference = experiment
    env = _env(folder / "out", "checkpoints/ctrl-c-marin-run")
    command = [sys.executable, "-m", "marin.cli", "run", "exp.py"]
    at, rc, stderr, output = _run_and_stop(
        folder, env, command, env["RUN_NAME"], lambda proc: os.killpg(proc.pid, signal.SIGINT)
    )
    assert rc == 130, stderr[-3000:]
    assert "got SIGINT: finishing this step, then writing a checkpoint" in stderr
    assert (
        stderr.strip()
        .splitlines()[-1]
        .startswith("error: interrupted by SIGINT: cancelled 1 running step(s)")
    )
    _check_resume(folder, env, output, at, reference, stderr, plan=True)


def test_ctrl_c_on_python_exp_py_loses_at_most_the_step_under_way(experiment):
    folder, reference = experiment
    env = _env(folder / "out", "checkpoints/ctrl-c-python")
    command = [sys.executable, "exp.py"]
    at, rc, stderr, output = _run_and_stop(
        folder, env, command, env["RUN_NAME"], lambda proc: os.killpg(proc.pid, signal.SIGINT)
    )
    assert rc != 0 and "RunInterruptedError: interrupted by SIGINT: cancelled 1 running step(s)" in stderr
    _check_resume(folder, env, output, at, reference, stderr)


def test_sigterm_to_the_runner_alone_loses_at_most_the_step_under_way(experiment):
    # What a scheduler's preemption notice or `kill` does: the runner alone gets it, and its cancel
    # tells the step's process (SIGTERM), which finishes the step and checkpoints.
    folder, reference = experiment
    env = _env(folder / "out", "checkpoints/sigterm")
    command = [sys.executable, "-m", "marin.cli", "run", "exp.py"]
    at, rc, stderr, output = _run_and_stop(
        folder, env, command, env["RUN_NAME"], lambda proc: proc.send_signal(signal.SIGTERM)
    )
    assert rc == 130, stderr[-3000:]
    assert "got SIGTERM: finishing this step, then writing a checkpoint" in stderr
    _check_resume(folder, env, output, at, reference, stderr)


def test_a_step_cancelled_on_ray_loses_at_most_the_step_under_way(experiment, ray_nodes):
    # The runner drives the step as a Ray task; Ctrl-C reaches the runner (the Ray worker is no
    # process of the terminal's), which cancels the task: Ray interrupts it, it checkpoints.
    folder, reference = experiment
    env = _env(folder / "out", "checkpoints/ray-cancel", MARIN_CLUSTER="ray", RAY_ADDRESS=ray_nodes.address)
    command = [sys.executable, "-m", "marin.cli", "run", "exp.py"]
    at, rc, stderr, output = _run_and_stop(
        folder, env, command, env["RUN_NAME"], lambda proc: os.killpg(proc.pid, signal.SIGINT)
    )
    assert rc == 130, stderr[-3000:]
    log = (output / ".executor_log").read_text()
    assert "got SIGINT: finishing this step, then writing a checkpoint" in log, log[-3000:]
    _check_resume(folder, env, output, at, reference, stderr)
