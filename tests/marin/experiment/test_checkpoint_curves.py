"""Intermediate exports and the evaluation of every one of them: a curve per metric over steps and tokens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from marin.execution.errors import StepDefinitionError
from marin.execution.lazy import lower
from marin.execution.step_runner import StepRunner
from marin.experiment.evaluate import evaluate
from tests.marin.experiment.tiny_runs import tiny_data, tiny_model

STEPS, EVERY, BATCH, SEQ = 40, 10, 4, 64
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def trained():
    _, data = tiny_data()
    model = tiny_model("checkpoints/tiny", data, num_train_steps=STEPS, seq_len=SEQ, export_every=EVERY)
    return data, model


def test_every_export_is_scored_and_the_curve_ends_at_the_final_model(trained, tmp_path, warm_cluster):
    data, model = trained
    options = dict(datasets=[data], harness_tasks=("marin_story_endings",), harness_items=8)
    first = evaluate("eval/curve", model=model, checkpoints=[10, 20], **options)
    runner = StepRunner(prefix=str(tmp_path), progress=False, max_concurrent=1, cluster=warm_cluster)
    earlier = json.loads((Path(runner.run([first]).output_path(lower(first))) / "results.json").read_text())
    ev = evaluate(
        "eval/curve",
        model=model,
        datasets=[data],
        harness_tasks=("marin_story_endings",),
        harness_items=8,
        checkpoints="all",
    )
    run = StepRunner(prefix=str(tmp_path), progress=False, max_concurrent=1, cluster=warm_cluster).run([ev])

    train_out = Path(run.output_path(lower(model)))
    train = json.loads((train_out / ".artifact.json").read_text())["result"]
    assert train["exports"] == {str(s): f"hf/step-{s:08d}" for s in (10, 20, 30, 40)}
    assert sorted(p.name for p in (train_out / "hf").iterdir() if p.is_dir()) == [
        f"step-{s:08d}" for s in (10, 20, 30, 40)
    ]
    results = json.loads((Path(run.output_path(lower(ev))) / "results.json").read_text())
    checkpoints = results["checkpoints"]
    assert checkpoints["steps"] == [10, 20, 30, 40]
    bpb = checkpoints["curves"]["bpb"]
    assert [p["step"] for p in bpb] == [10, 20, 30, 40]
    assert [p["tokens"] for p in bpb] == [s * BATCH * SEQ for s in (10, 20, 30, 40)]
    assert all(p["ci95"][0] <= p["value"] <= p["ci95"][1] for p in bpb)
    assert bpb[0]["value"] > bpb[-1]["value"]  # it learned
    final = results["perplexity"]["micro"]["bpb"]
    assert bpb[-1]["value"] == final["value"] and bpb[-1]["ci95"] == final["ci95"]  # the same weights
    acc = checkpoints["curves"]["marin_story_endings/acc"]
    assert len(acc) == 4 and acc[-1]["value"] == results["harness"]["marin_story_endings"]["acc"]["value"]
    # the curve gained steps 30 and 40: it took what the first evaluation scored (the final model,
    # steps 10 and 20) and scored only step 30 (step 40 is the final model's weights, scored already)
    counts, before = results["score_cache"], earlier["score_cache"]
    assert counts["imported"] == before["computed"] and counts["computed"] == before["computed"] // 3

    # the sweep report draws the curve (with its intervals) against training tokens
    from marin.experiment.evaluate import sweep_report

    report = sweep_report("reports/curve", {"tiny": ev}, metrics=("bpb",))
    out = Path(
        StepRunner(prefix=str(tmp_path), progress=False, cluster=warm_cluster)
        .run([report])
        .output_path(lower(report))
    )
    assert (out / "plot.png").read_bytes()[:4] == b"\x89PNG"
    assert len((out / "table.csv").read_text().splitlines()) == 5  # a header and 4 points

    # and Marina's evaluation page draws it
    from starlette.testclient import TestClient

    from marin.ui.app import UiConfig, create_app

    rel = Path(run.output_path(lower(ev))).relative_to(tmp_path)
    with TestClient(create_app(UiConfig(str(tmp_path)))) as client:
        page = client.get(f"/evals/{rel}").text
    assert "Over training" in page and page.count('class="checkpoint-curve"') == len(checkpoints["curves"])


def test_a_checkpoint_that_will_not_exist_is_one_error_naming_the_exports(trained, tmp_path):
    _, model = trained
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(
        StepDefinitionError, match=r"checkpoints=\[15\]: step\(s\) \[15\] will not exist.*\[10, 20, 30, 40\]"
    ):
        evaluate("eval/x", model=model, harness_tasks=("marin_story_endings",), checkpoints=[15])
    with pytest.raises(StepDefinitionError, match="model= is not a step"):
        evaluate("eval/x", model=str(tmp_path), harness_tasks=("marin_story_endings",), checkpoints="all")


CURVE_RUN = "marin run experiments/tutorials/checkpoint_curve.py"
STEPS_EXPERIMENT = """
import os

from experiments.tutorials.checkpoint_curve import model, stories
from marin.execution.lazy import lower
from marin.experiment.evaluate import evaluate

ev = evaluate(
    "eval/curve-steps",
    model=lower(model),  # a StepSpec: its exports are known only when the evaluation runs
    datasets=[stories],
    checkpoints=[int(s) for s in os.environ["CURVE_STEPS"].split(",")],
)
"""


def _curve_env(prefix: Path) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if k != "MARIN_TOKENIZER"}
    env.update(MARIN_PREFIX=str(prefix), PATH=f"{REPO / '.venv' / 'bin'}:{env['PATH']}", PYTHONPATH=str(REPO))
    return env


def _sh(command: str, env: dict[str, str]):
    import subprocess

    return subprocess.run(command, shell=True, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def documented_curve(tmp_path_factory) -> Path:
    """The prefix after `marin run experiments/tutorials/checkpoint_curve.py`, as docs/evaluation.md says
    to type it (a tokenizer, a token cache, a 40-step training and four evaluations, each in its own
    process)."""
    prefix = tmp_path_factory.mktemp("curve") / "out"
    done = _sh(CURVE_RUN, _curve_env(prefix))
    assert done.returncode == 0, done.stderr[-3000:]
    return prefix


def test_the_documented_curve_without_the_harness_runs_as_written(documented_curve):
    """docs/evaluation.md's curve: the tutorial file shown there, run through `marin run` as the doc says,
    scores every export without a harness task."""
    doc = (REPO / "docs" / "evaluation.md").read_text()
    source = (REPO / "experiments" / "tutorials" / "checkpoint_curve.py").read_text()
    assert source[source.index("from marin.experiment.data") :] in doc  # the doc shows the file as it is
    (out,) = (p for p in (documented_curve / "eval").glob("curve-*") if not p.name.startswith("curve-steps"))
    results = json.loads((out / "results.json").read_text())
    bpb = results["checkpoints"]["curves"]["bpb"]
    assert [p["step"] for p in bpb] == [10, 20, 30, 40] and "harness" not in results
    assert bpb[-1]["value"] == results["perplexity"]["micro"]["bpb"]["value"]
    assert all(
        (out / "checkpoints" / f"step-{s:08d}" / "documents.jsonl").is_file() for s in (10, 20, 30, 40)
    )


def test_a_missing_checkpoint_of_a_step_spec_model_is_one_line_and_the_corrected_step_runs(
    documented_curve, tmp_path
):
    """A StepSpec model asked for a step it did not export fails in one line naming those it did, and
    the corrected evaluation runs at once (nothing stays blocked); the training is reused."""
    (tmp_path / "steps.py").write_text(STEPS_EXPERIMENT)
    env = _curve_env(documented_curve)
    failed = _sh(f"marin run {tmp_path / 'steps.py'}", {**env, "CURVE_STEPS": "15"})
    assert failed.returncode == 2 and "Traceback" not in failed.stderr
    assert [line for line in failed.stderr.splitlines() if line.startswith("error:")] == [
        (
            "error: step 'eval/curve-steps' failed: checkpoints=[15]: model step 'checkpoints/curve' has no export "
            "of step(s) [15]; it exported steps [10, 20, 30, 40] (train_lm(..., export_every=N) exports every N "
            "steps and the last)"
        )
    ], failed.stderr
    fixed = _sh(f"marin run {tmp_path / 'steps.py'}", {**env, "CURVE_STEPS": "20,40"})
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    curves = [
        json.loads(results.read_text())["checkpoints"]["steps"]
        for results in (documented_curve / "eval").glob("curve-steps-*/results.json")
    ]
    assert curves == [[20, 40]]
