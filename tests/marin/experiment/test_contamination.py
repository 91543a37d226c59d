"""Contamination from the lineage: held-out items planted into a model's training data (verbatim, and
with small edits) are flagged, no others are, and the model scores them better by a significant margin."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from marin.data.corpus import stories
from marin.evaluation.documents import TextDataset
from marin.evaluation.results import read_items, read_results
from marin.execution.errors import StepDefinitionError
from marin.execution.lazy import lower
from marin.execution.step_runner import StepRunner
from marin.experiment.data import tokenized, train_tokenizer
from marin.experiment.evaluate import evaluate
from marin.experiment.train import train_lm
from marin.training.models import LlamaConfig
from marin.training.optim import AdamConfig

SRC = Path(__file__).resolve().parents[3] / "src" / "marin"
ITEMS, PLANTED, COPIES = 40, 10, 16


def held_out_items() -> list[str]:
    """Paragraphs of English prose that no story resembles: the opening of modules' docstrings."""
    texts = []
    for path in sorted(SRC.rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text()))
        if doc and len(doc) >= 500:
            texts.append(" ".join(doc[:500].split()))
    assert len(texts) >= ITEMS
    return texts[:ITEMS]


def edited(text: str) -> str:
    """A small edit: two words replaced, as a scraped copy might differ."""
    words = text.split()
    words[len(words) // 3] = "banana"
    words[2 * len(words) // 3] = "umbrella"
    return " ".join(words)


def test_planted_items_are_flagged_and_score_better_and_no_others_are(tmp_path):
    items = held_out_items()
    verbatim, with_edits = range(0, PLANTED // 2), range(PLANTED // 2, PLANTED)
    planted = [items[i] for i in verbatim] + [edited(items[i]) for i in with_edits]
    train = tmp_path / "train.jsonl"
    rows = [{"text": str(s)} for s in stories(0, 300)] + [{"text": t} for t in planted for _ in range(COPIES)]
    train.write_text("".join(json.dumps(r) + "\n" for r in rows))
    held = tmp_path / "held_out.jsonl"
    held.write_text("".join(json.dumps({"text": t}) + "\n" for t in items))

    tokenizer = train_tokenizer(name="tokenizers/planted", paths=[str(train)], vocab_size=512)
    data = tokenized(
        name="tokenized/planted", tokenizer=tokenizer, paths=[str(train)], validation_fraction=0.0
    )
    model = train_lm(
        "checkpoints/planted",
        model=LlamaConfig(hidden_dim=64, intermediate_dim=128, num_layers=2, num_heads=2, max_seq_len=128),
        optimizer=AdamConfig(learning_rate=3e-3),
        datasets={data: 1.0},
        batch_size=8,
        seq_len=128,
        num_train_steps=160,
        cpu_threads=1,
    )
    ev = evaluate(
        "eval/planted", model=model, datasets=[TextDataset("held_out", (str(held),))], contamination=True
    )
    run = StepRunner(prefix=str(tmp_path / "out"), progress=False).run([ev])
    out = run.output_path(lower(ev))

    results = read_results(out)
    report = results.contamination
    assert report.lineage == [run.output_path(lower(data))] and report.training_tokens > 0
    flags = read_items(out).contamination["perplexity/held_out"]
    assert [i for i, f in enumerate(flags.flagged) if f] == list(range(PLANTED))
    assert all(flags.overlap[i] == 1.0 for i in verbatim)
    assert all(0.5 <= flags.overlap[i] < 1.0 for i in with_edits)
    assert max(flags.overlap[PLANTED:]) < 0.1  # the clean items share next to nothing with the training data

    group = report.perplexity["held_out"]
    assert (group.items, group.contaminated, group.unchecked) == (ITEMS, PLANTED, 0)
    bpb = group.metrics["bpb"]
    assert bpb.all.n == ITEMS and bpb.clean.n == ITEMS - PLANTED and bpb.contaminated.n == PLANTED
    assert bpb.all.value == results.perplexity.datasets["held_out"].bpb.value
    difference = bpb.contaminated_minus_clean
    assert difference.ci95[1] < 0 and bpb.p_value < 0.05  # the planted items: fewer bits, significantly
    flat = results.flat_metrics()
    assert flat["bpb/held_out/clean"] == bpb.clean and flat["bpb/held_out/contaminated"] == bpb.contaminated

    # marin compare and Marina show the score on all items and on the clean ones
    from starlette.testclient import TestClient

    from marin.evaluation.compare import compare
    from marin.evaluation.compare_render import render
    from marin.ui.app import UiConfig, create_app

    table = render(compare([out]), "md")
    assert "| bpb/held_out |" in table and "| bpb/held_out/clean |" in table
    rel = Path(out).relative_to(tmp_path / "out")
    with TestClient(create_app(UiConfig(str(tmp_path / "out")))) as client:
        page = client.get(f"/evals/{rel}").text
        assert "<h2>Contamination</h2>" in page and "held_out" in page
        assert "bpb/held_out/clean" in client.get("/evals").text


def test_contamination_of_a_model_without_a_lineage_is_refused_when_declared(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(StepDefinitionError, match="contamination=True needs the training data"):
        evaluate("eval/x", model=str(tmp_path), harness_tasks=("marin_story_endings",), contamination=True)
