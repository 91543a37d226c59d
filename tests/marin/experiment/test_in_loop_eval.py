"""Harness tasks on the live model during training agree with a post-hoc evaluate() of the final export.

The run trains on two processes (DDP over gloo), which share the in-loop items; the post-hoc
evaluation is one process, so the equality also says the ranks' shared scoring is one process's
(tests/marin/evaluation/test_harness.py checks that each rank scores its half)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import storage
from marin.execution.lazy import lower
from marin.execution.step_runner import StepRunner
from marin.experiment.evaluate import evaluate
from tests.marin.experiment.tiny_runs import tiny_data, tiny_model

TASKS = ("marin_story_endings", "marin_text_perplexity")


def test_in_loop_metrics_of_two_ranks_at_the_last_step_equal_the_final_exports_evaluation(tmp_path):
    _, data = tiny_data(sample_count=120)
    model = tiny_model(
        "checkpoints/in-loop",
        data,
        num_train_steps=4,
        eval_tasks=TASKS,
        eval_tasks_every=2,
        eval_task_items=8,
        num_processes=2,
    )
    ev = evaluate("eval/after", model=model, harness_tasks=TASKS, harness_items=8)
    run = StepRunner(prefix=str(tmp_path), progress=False, max_concurrent=1).run([ev])

    records = storage.read_records(str(Path(run.output_path(lower(model))) / "metrics.jsonl"))
    logged = [r for r in records if "marin_story_endings/acc" in r]
    assert [r["step"] for r in logged] == [2, 4]
    last = logged[-1]
    results = json.loads((Path(run.output_path(lower(ev))) / "results.json").read_text())["harness"]
    for task, metric in (
        ("marin_story_endings", "acc"),
        ("marin_story_endings", "acc_norm"),
        ("marin_text_perplexity", "bits_per_byte"),
    ):
        after = results[task][metric]
        assert last[f"{task}/{metric}"] == pytest.approx(after["value"], abs=1e-5)
        assert last[f"{task}/{metric}_stderr"] == pytest.approx(after["stderr"], abs=1e-5)
        assert last[f"{task}/{metric}_n"] == after["n"] == 8
