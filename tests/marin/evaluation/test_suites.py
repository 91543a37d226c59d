"""The suites as data, and each one's prompts, few-shot sampling and scoring, run offline through the real
harness on small local datasets in the hub's schema (tests/marin/evaluation/suite_data.py)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from marin.evaluation import stats
from marin.evaluation.checkpoint import load_hf_model
from marin.evaluation.errors import SuiteError
from marin.evaluation.evaluation_step import suite_aggregate
from marin.evaluation.harness import run_tasks
from marin.evaluation.suites import SUITES, PromptFormat, suite
from marin.execution.lazy import lower
from tests.marin.evaluation import suite_data

UPSTREAM_CORE_SHOTS = {
    "agieval_lsat_ar": 3,
    "arc_easy": 10,
    "arc_challenge": 10,
    "boolq": 10,
    "commonsense_qa": 10,
    "copa": 0,
    "hellaswag_0shot": 0,
    "hellaswag_10shot": 10,
    "lambada_openai": 0,
    "openbookqa": 0,
    "piqa": 10,
    "wsc273": 0,
    "winogrande": 0,
}
TAG = re.compile(r"(?:train|validation|test|dev|val)#\d+")


@pytest.fixture(scope="module")
def local_data(tmp_path_factory) -> dict[str, str]:
    return suite_data.build(tmp_path_factory.mktemp("hub"))


def _local(name: str, local_data: dict[str, str], *only: str):
    chosen = SUITES[name].only(*only) if only else SUITES[name]
    return chosen.with_dataset_paths(
        {d: p for d, p in local_data.items() if d in {t.dataset for t in chosen.tasks}}
    )


def _run(chosen, tiny_export, tmp_path):
    loaded = load_hf_model(tiny_export)
    tasks_dir = tmp_path / "tasks"
    tasks_dir.mkdir()
    return run_tasks(loaded.model, loaded.tokenizer, chosen.tasks, str(tasks_dir), batch_size=8)


def test_suites_hold_upstreams_tasks_shots_formats_and_chance():
    core = SUITES["core"]
    assert {t.name: t.shots for t in core.tasks} == UPSTREAM_CORE_SHOTS
    assert {t.name: t.format for t in core.tasks if t.format == PromptFormat.MULTIPLE_CHOICE} == {
        "agieval_lsat_ar": "multiple_choice",
        "commonsense_qa": "multiple_choice",
    }
    assert {t.name: t.chance for t in core.tasks}["commonsense_qa"] == 0.2
    for name, shots in (("mmlu_0shot", 0), ("mmlu_5shot", 5)):
        mmlu = SUITES[name]
        assert len(mmlu.tasks) == 57 and {t.shots for t in mmlu.tasks} == {shots}
        assert {(t.format, t.metric, t.chance) for t in mmlu.tasks} == {("multiple_choice", "acc", 0.25)}
    paloma = SUITES["paloma"]
    assert len(paloma.tasks) == 16 and {t.metric for t in paloma.tasks} == {"bits_per_byte"}


def test_every_task_setting_is_in_the_evaluation_key():
    from marin.execution.step_spec import StepSpec
    from marin.experiment.evaluate import evaluate

    model = StepSpec("checkpoints/m", lambda: None)
    keyed = lower(evaluate("eval/core", model=model, suite="core")).hash_attrs["suite"]
    assert keyed["name"] == "core" and keyed["aggregate"] == "centred_accuracy"
    assert keyed["tasks"][7] == {
        "name": "hellaswag_10shot",
        "harness_task": "hellaswag",
        "harness_dir": "hellaswag",
        "shots": 10,
        "format": "cloze",
        "metric": "acc_norm",
        "chance": 0.25,
        "dataset": "Rowan/hellaswag",
    }  # dataset_path and overrides at their defaults stay out of the key
    assert keyed["tasks"][0]["overrides"] == [["doc_to_target", "{{gold[0]}}"]]
    fewer = SUITES["core"].only("arc_easy")
    assert (
        lower(evaluate("eval/core", model=model, suite=fewer)).hash_attrs
        != lower(evaluate("eval/core", model=model, suite="core")).hash_attrs
    )


def test_core_prompts_shots_and_scores_offline(local_data, tiny_export, tmp_path):
    core = _local("core", local_data)
    done = _run(core, tiny_export, tmp_path)

    for task in core.tasks:
        rows = done[task.name].samples
        assert len(rows) == done[task.name].metrics[task.metric].n > 0
        for row in rows:
            context = row["arguments"][0][0]
            # each shot, and the item itself, carries one tag: the prompt holds exactly `shots` examples
            assert len(TAG.findall(context)) == task.shots + 1, (task.name, context)
        choices = [a[1] for a in rows[0]["arguments"]]
        if task.format == PromptFormat.MULTIPLE_CHOICE and task.name == "commonsense_qa":
            assert choices == [" A", " B", " C", " D", " E"]  # the letters are scored
        elif task.name in ("arc_easy", "piqa", "hellaswag_10shot"):
            assert all(len(c.strip()) > 3 for c in choices)  # cloze: the answers' own text is scored
            for row in rows:  # scoring: correct when the gold answer has the highest log-likelihood
                loglik = [r[0] for r in row["filtered_resps"]]
                assert row["acc"] == float(int(np.argmax(loglik)) == int(row["target"]))

    aggregate = suite_aggregate(core, done, stats.ITERS, stats.SEED).centred_accuracy
    expected = np.mean(
        [(done[t.name].metrics[t.metric].value - t.chance) / (1 - t.chance) for t in core.tasks]
    )
    assert aggregate.value == pytest.approx(expected)
    assert aggregate.ci95[0] <= aggregate.value <= aggregate.ci95[1] and aggregate.direction == "higher"


def test_mmlu_5shot_through_evaluate_takes_the_first_five_dev_questions(local_data, tiny_export, tmp_path):
    import functools
    import shutil

    from marin.execution.step_runner import StepRunner
    from marin.execution.step_spec import StepSpec
    from marin.experiment.evaluate import evaluate

    def publish(output_path: str) -> dict:
        shutil.copytree(tiny_export, Path(output_path) / "hf")
        return {}

    mmlu = _local("mmlu_5shot", local_data, "mmlu_anatomy", "mmlu_astronomy")
    ev = evaluate("eval/mmlu", model=StepSpec("checkpoints/tiny", functools.partial(publish)), suite=mmlu)
    out = Path(StepRunner(prefix=str(tmp_path / "out"), progress=False).run([ev]).output_path(lower(ev)))
    results = json.loads((out / "results.json").read_text())

    assert (
        results["tasks"]["mmlu_anatomy"]["shots"] == 5
        and results["tasks"]["mmlu_anatomy"]["format"] == "multiple_choice"
    )
    first = json.loads((out / "harness_samples" / "mmlu_anatomy.jsonl").read_text().splitlines()[0])
    context = first["arguments"][0][0]
    assert context.startswith("The following are multiple choice questions (with answers) about anatomy.")
    assert TAG.findall(context) == ["dev#0", "dev#1", "dev#2", "dev#3", "dev#4", "test#0"]
    pooled = results["suite"]["acc"]
    counts = [results["harness"][t]["acc"] for t in ("mmlu_anatomy", "mmlu_astronomy")]
    assert pooled["n"] == 8 and pooled["value"] == pytest.approx(sum(c["value"] * c["n"] for c in counts) / 8)
    artifact = json.loads((out / ".artifact.json").read_text())["result"]
    assert (
        artifact["headline"]["metric"] == "mmlu_5shot/acc" and artifact["headline"]["ci95"] == pooled["ci95"]
    )


def test_paloma_pools_bits_per_byte_over_its_domains(local_data, tiny_export, tmp_path):
    paloma = _local("paloma", local_data, "paloma_c4_en", "paloma_ptb")
    done = _run(paloma, tiny_export, tmp_path)
    aggregate = suite_aggregate(paloma, done, stats.ITERS, stats.SEED)

    items = [done[t.name].items["bits_per_byte"] for t in paloma.tasks]
    nll = sum(sum(i["values"]) for i in items)
    num_bytes = sum(sum(i["weights"]) for i in items)
    assert aggregate.bits_per_byte.value == pytest.approx(nll / num_bytes / math.log(2))
    each = [done[t.name].metrics["bits_per_byte"].value for t in paloma.tasks]
    assert aggregate.macro_bits_per_byte.value == pytest.approx(np.mean(each))
    assert aggregate.macro_bits_per_byte.aggregation == "macro"


def test_unknown_suite_or_task_names_the_nearest():
    from marin.execution.step_spec import StepSpec
    from marin.experiment.evaluate import evaluate

    with pytest.raises(SuiteError, match=r"suite='cor'.*did you mean 'core'\?"):
        evaluate("eval/x", model=StepSpec("checkpoints/m", lambda: None), suite="cor")
    with pytest.raises(SuiteError, match="did you mean 'arc_easy'"):
        suite("core").only("arc_eazy")
    with pytest.raises(SuiteError, match="harness_tasks: unknown task 'hellaswog'.*did you mean 'hellaswag'"):
        evaluate("eval/x", model=StepSpec("checkpoints/m", lambda: None), harness_tasks=("hellaswog",))


def test_the_docs_suites_table_is_the_suites():
    doc = (Path(__file__).resolve().parents[3] / "docs" / "evaluation.md").read_text()
    rows = re.findall(r"^\| `core` \| `(\w+)` \| (\d+) \| ([\w ]+) \| (\w+) \| ([\d.]+) \|$", doc, re.M)
    documented = {
        name: (int(shots), fmt.replace(" ", "_"), metric, float(chance))
        for name, shots, fmt, metric, chance in rows
    }
    assert documented == {t.name: (t.shots, t.format.value, t.metric, t.chance) for t in SUITES["core"].tasks}
