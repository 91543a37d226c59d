"""evaluate() and sweep_report() as steps run by the real StepRunner on a real tiny export."""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path

import pytest

from marin.evaluation.documents import TextDataset
from marin.evaluation.harness import OWN_TASKS
from marin.evaluation.samples import SamplingConfig
from marin.execution.errors import StepFailedError
from marin.execution.lazy import lower
from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec
from marin.experiment.evaluate import evaluate, sweep_report
from tests.marin.evaluation.tiny_hf import build_tiny_export, held_out_stories
from tests.marin.experiment.tiny_runs import tiny_data, tiny_model


@pytest.fixture(scope="module")
def tiny_export(tmp_path_factory) -> str:
    return str(build_tiny_export(tmp_path_factory.mktemp("tiny_hf")))


def publish_export(source: str, output_path: str) -> dict:
    """A stand-in train step: its output holds the export under hf/, as train_lm's does."""
    shutil.copytree(source, Path(output_path) / "hf")
    return {"hf_path": str(Path(output_path) / "hf")}


def crash_before_export(output_path: str) -> dict:
    """A train step that wrote checkpoints but never exported."""
    (Path(output_path) / "checkpoints").mkdir(parents=True)
    return {}


def write_metrics(curve: list[tuple[int, float]], output_path: str) -> dict:
    """A stand-in train step that logged eval metrics against tokens."""
    lines = [
        json.dumps({"step": i, "tokens": t, "train_loss": 9.0, "eval_loss": v, "eval_bpb": v / 2})
        for i, (t, v) in enumerate(curve)
    ]
    (Path(output_path) / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return {}


@pytest.fixture()
def text_dataset(tmp_path) -> TextDataset:
    path = tmp_path / "eval.jsonl"
    rows = [
        {"text": text, "tag": "even" if i % 2 == 0 else "odd"} for i, text in enumerate(held_out_stories(6))
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return TextDataset("stories", (str(path),), domain_field="tag")


def test_evaluation_step_writes_results_and_headline_and_reruns_identically(
    tmp_path, tiny_export, text_dataset, warm_cluster
):
    model = StepSpec("checkpoints/tiny", functools.partial(publish_export, tiny_export))
    ev = evaluate(
        "eval/tiny",
        model=model,
        datasets=[text_dataset],
        harness_tasks=OWN_TASKS,
        prompts=("Once upon a time",),
        harness_items=10,
        sampling=SamplingConfig(max_new_tokens=8, num_samples=2, seed=1),
    )
    runner = StepRunner(prefix=str(tmp_path / "out"), progress=False, cluster=warm_cluster)

    result = runner.run([ev])
    out = Path(result.output_path(lower(ev)))
    results = json.loads((out / "results.json").read_text())
    artifact = json.loads((out / ".artifact.json").read_text())

    perplexity = results["perplexity"]
    assert list(perplexity["datasets"]) == ["stories"]
    assert sorted(perplexity["domains"]) == ["stories/even", "stories/odd"]
    assert perplexity["micro"]["bytes"] == sum(len(text.encode()) for text in held_out_stories(6))
    assert set(results["harness"]) == set(OWN_TASKS)
    assert [s["mode"] for s in results["samples"]][0] == "greedy" and len(results["samples"]) == 3
    assert (out / "samples.jsonl").read_text().count("\n") == 3
    for task in OWN_TASKS:  # the harness's per-sample outputs, one line per item
        assert results["harness_samples"][task] == f"harness_samples/{task}.jsonl"
        assert (out / results["harness_samples"][task]).read_text().count("\n") == 10
    headline = artifact["result"]["headline"]
    assert headline["metric"] == "bpb" and headline["value"] == perplexity["micro"]["bpb"]["value"]
    lo, hi = headline["ci95"]
    assert lo < headline["value"] < hi and headline["n"] == 6
    for task in OWN_TASKS:  # every harness metric is a metric object that knows its direction and aggregation
        for metric in results["harness"][task].values():
            assert set(metric) == {"value", "stderr", "ci95", "n", "direction", "aggregation"}
            assert metric["n"] == 10
    assert results["harness"]["marin_story_endings"]["acc"]["direction"] == "higher"
    assert results["harness"]["marin_text_perplexity"]["bits_per_byte"]["aggregation"] == "ratio"
    items = json.loads((out / "items.json").read_text())
    assert len(items["harness"]["marin_story_endings"]["acc"]["ids"]) == 10
    assert len(items["perplexity"]["stories"]["nll"]) == 6

    first = (out / "results.json").read_bytes()
    runner.run([ev], force_run=[ev.name])  # recompute without the cache
    assert (out / "results.json").read_bytes() == first

    # a TextDataset's files are declared inputs: editing one plans the evaluation as changed, naming it
    path = Path(text_dataset.paths[0])
    path.write_text(path.read_text() + json.dumps({"text": "One more story.", "tag": "odd"}) + "\n")
    step = runner.plan([ev]).of(lower(ev))
    assert step.state == "run: changed"
    assert any("eval.jsonl changed" in (change.note or "") for change in step.changes), step.changes


def test_batch_size_changes_no_score_and_stays_out_of_the_key(
    tmp_path, tiny_export, text_dataset, warm_cluster
):
    """Perplexity and harness scores are the same whatever the batch, so batch_size is not keyed."""
    model = StepSpec("checkpoints/tiny", functools.partial(publish_export, tiny_export))

    def run(batch_size: int) -> tuple[str, dict]:
        ev = evaluate(
            "eval/tiny",
            model=model,
            datasets=[text_dataset],
            harness_tasks=OWN_TASKS,
            harness_items=6,
            batch_size=batch_size,
        )
        runner = StepRunner(
            prefix=str(tmp_path / f"batch-{batch_size}"), progress=False, cluster=warm_cluster
        )
        key = runner.plan([lower(ev)]).of(lower(ev)).key
        out = Path(runner.run([ev]).output_path(lower(ev)))
        return key, json.loads((out / "results.json").read_text())

    (key_one, one), (key_five, five) = run(1), run(5)
    assert key_one == key_five
    assert one["config"]["batch_size"] == 1 and five["config"]["batch_size"] == 5
    assert one["perplexity"]["micro"]["documents"] == 6 and one["harness"]
    assert one["perplexity"] == five["perplexity"]
    assert one["harness"] == five["harness"]


def test_unfinished_checkpoint_fails_with_the_model_step_name(tmp_path, text_dataset, warm_cluster):
    model = StepSpec("checkpoints/crashed", crash_before_export)
    ev = evaluate("eval/crashed", model=model, datasets=[text_dataset])
    with pytest.raises(StepFailedError) as failure:
        StepRunner(prefix=str(tmp_path / "out"), progress=False, cluster=warm_cluster).run([ev])
    assert "eval/crashed" in failure.value.failures
    assert "model step 'checkpoints/crashed'" in failure.value.failures["eval/crashed"]
    assert "hf/config.json is missing" in failure.value.failures["eval/crashed"]


def test_evaluate_handle_is_hashable_and_lowers_model_and_token_cache_steps(text_dataset):
    model = StepSpec("checkpoints/m", crash_before_export)
    cache = StepSpec("tokenized/c", crash_before_export)
    ev = evaluate("eval/m", model=model, datasets=[cache, text_dataset], prompts=("hi",))
    same = evaluate("eval/m", model=model, datasets=[cache, text_dataset], prompts=("hi",))
    assert ev == same and hash(ev) == hash(same)
    spec = lower(ev)
    assert spec.deps == (model, cache)
    assert spec.hash_attrs["datasets"][0] == {"step_name": "tokenized/c", "split": "validation"}
    assert spec.hash_attrs["model"] == {"step": "checkpoints/m"}
    assert spec.inputs == text_dataset.paths  # a TextDataset's files are declared inputs
    with pytest.raises(Exception, match="nothing to do"):
        evaluate("eval/empty", model=model)


def test_sweep_report_writes_table_csv_and_plot(tmp_path, warm_cluster):
    runs = {
        f"lr={lr}": StepSpec(f"checkpoints/lr{lr}", functools.partial(write_metrics, curve))
        for lr, curve in [
            ("1e-3", [(0, 5.0), (100, 4.0), (200, 3.5)]),
            ("3e-3", [(0, 5.0), (100, 3.0), (200, 2.5)]),
        ]
    }
    report = sweep_report("reports/lr", runs)
    result = StepRunner(prefix=str(tmp_path / "out"), progress=False, cluster=warm_cluster).run([report])
    out = Path(result.output_path(lower(report)))

    table = (out / "table.md").read_text()
    assert "| lr=3e-3 | checkpoints/lr3e-3 | 200 | 2.5 | 2.5 | 1.25 | 1.25 |" in table
    header = (out / "table.csv").read_text().splitlines()[0]
    assert header.startswith("run,setting,tokens,eval_loss,eval_loss_ci95_lo,eval_loss_ci95_hi,eval_bpb")
    assert len((out / "table.csv").read_text().splitlines()) == 7
    assert (out / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    headline = json.loads((out / ".artifact.json").read_text())["result"]["headline"]
    assert (headline["metric"], headline["value"], headline["run"]) == ("final_eval_loss", 2.5, "lr=3e-3")
    assert not headline["separable"]  # one seed each, no interval logged: the sweep cannot tell


def test_trained_model_scores_its_token_cache_like_the_trainer_does(tmp_path, warm_cluster):
    from marin.data.token_cache import TokenCache

    _, data = tiny_data(vocab_size=512, sample_count=240, tokenizer_samples=300)
    model = tiny_model("checkpoints/tiny", data, num_train_steps=12)
    ev = evaluate("eval/tiny", model=model, datasets=[data], batch_size=16)
    result = StepRunner(
        prefix=str(tmp_path / "out"), progress=False, max_concurrent=1, cluster=warm_cluster
    ).run([ev])

    scored = json.loads((Path(result.output_path(lower(ev))) / "results.json").read_text())["perplexity"]
    validation = TokenCache.open(result.output_path(lower(data))).split("validation")
    metrics = scored["datasets"]["tokenized/stories"]
    assert metrics["documents"] == validation.num_documents
    assert metrics["bytes"] == validation.num_bytes  # the original texts' bytes, from the cache
    assert (
        metrics["tokens"] == validation.num_tokens - validation.num_documents
    )  # the appended EOS is not scored
    trainer = json.loads((Path(result.output_path(lower(model))) / ".artifact.json").read_text())["result"]
    # the trainer streams windows across documents, we score documents whole: close, not equal
    assert metrics["bpb"]["value"] == pytest.approx(trainer["final_eval_bpb"], rel=0.05)
