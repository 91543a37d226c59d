"""Perplexity gaps: byte classes, byte-aligned losses across tokenizers, the gap step and `marin gap`."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from transformers import AutoTokenizer

from marin.evaluation.byte_classes import (
    CLASSES,
    byte_classes,
    byte_losses,
    token_byte_spans,
    token_class_fractions,
)
from marin.evaluation.documents import TextDataset
from marin.evaluation.gap import GAP_JSON
from marin.evaluation.results import read_results
from marin.execution.lazy import lower
from marin.execution.step_runner import StepRunner
from marin.experiment.evaluate import evaluate, perplexity_gap
from tests.marin.evaluation.tiny_hf import build_tiny_export

REPO = Path(__file__).resolve().parents[3]
TEXTS = REPO / "experiments" / "tutorials" / "data" / "gap_texts.jsonl"


def _class_of(text: str, fragment: str) -> set[str]:
    classes = byte_classes(text)
    start = len(text[: text.index(fragment)].encode())
    return {CLASSES[c] for c in classes[start : start + len(fragment.encode())]}


def test_each_byte_has_the_class_of_what_it_is():
    text = "See https://x.org/a?b=1 now: 3,50 € and\n    y = f(2);\nthe `ls -l` end."
    assert _class_of(text, "https://x.org/a?b=1") == {"url"}
    assert _class_of(text, "3,50") == {"number"}
    assert _class_of(text, "€") == {"non_ascii"}
    assert _class_of(text, "y = f(2);") == {"code"}
    assert _class_of(text, "`ls -l`") == {"code"}
    assert _class_of(text, "See") == {"text"} and _class_of(text, "now:") == {"text", "punctuation"}
    assert _class_of(text, " and") >= {"whitespace", "text"}
    assert len(byte_classes(text)) == len(text.encode())


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> tuple[str, str]:
    """Two models whose tokenizers differ (byte-level BPEs of 300 and 800 ids)."""
    small = build_tiny_export(tmp_path_factory.mktemp("small"), context=64, vocab_size=300, seed=1)
    large = build_tiny_export(tmp_path_factory.mktemp("large"), context=64, vocab_size=800, seed=2)
    return str(small), str(large)


def test_token_losses_spread_over_bytes_add_up_to_the_documents_loss_whatever_the_tokenizer(exports):
    rows = [json.loads(line) for line in TEXTS.read_text().splitlines()]
    rng = np.random.default_rng(0)
    for folder in exports:
        tokenizer = AutoTokenizer.from_pretrained(folder)
        for row in rows:
            text = row["text"]
            encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
            spans = token_byte_spans(text, encoded["offset_mapping"])
            assert spans[0, 0] == 0 and spans[-1, 1] == len(text.encode())
            assert np.all(spans[1:, 0] == spans[:-1, 1])  # a partition of the bytes, in order
            losses = rng.random(len(spans))
            per_byte = byte_losses(spans, losses, len(text.encode()))
            assert per_byte.sum() == pytest.approx(losses.sum(), rel=1e-12)
            fractions = token_class_fractions(spans, byte_classes(text))
            assert (losses @ fractions).sum() == pytest.approx(losses.sum(), rel=1e-12)


def test_two_tokenizers_gap_splits_exactly_and_a_model_against_itself_is_zero(
    exports, tmp_path, warm_cluster
):
    small, large = exports
    assert len(AutoTokenizer.from_pretrained(small)) != len(AutoTokenizer.from_pretrained(large))
    texts = TextDataset("gap_texts", (str(TEXTS),), domain_field="kind")
    gap = perplexity_gap("gaps/small-large", model_a=small, model_b=large, datasets=[texts], score_flush_s=0)
    same = perplexity_gap("gaps/small-small", model_a=small, model_b=small, datasets=[texts])
    evals = [
        evaluate(f"eval/{n}", model=m, datasets=[texts]) for n, m in (("small", small), ("large", large))
    ]
    run = StepRunner(prefix=str(tmp_path / "out"), progress=False, cluster=warm_cluster).run(
        [gap, same, *evals]
    )

    report = json.loads((Path(run.output_path(lower(gap))) / GAP_JSON).read_text())
    total = report["total"]
    assert [c["name"] for c in report["classes"]] == list(CLASSES)
    assert sum(c["value"] for c in report["classes"]) == pytest.approx(total["value"], abs=1e-9)
    assert sum(c["bytes"] for c in report["classes"]) == total["bytes"] == report["bytes"]
    assert {c["name"] for c in report["classes"] if c["bytes"]} == set(CLASSES)  # the texts hold every class
    # byte-aligned: each side's bits per byte is what an evaluation of that model alone reports
    a, b = (read_results(run.output_path(lower(e))).perplexity.micro.bpb.value for e in evals)
    assert total["bpb_a"] == pytest.approx(a, rel=1e-9) and total["bpb_b"] == pytest.approx(b, rel=1e-9)
    assert total["value"] == pytest.approx(a - b, abs=1e-9)
    assert total["ci95"][0] <= total["value"] <= total["ci95"][1] and total["n"] == 40
    assert sorted(d["name"] for d in report["domains"]) == ["gap_texts/mixed", "gap_texts/story"]
    assert report["a_wins"] or report["b_wins"]
    assert report["a_wins_spans"] and report["b_wins_spans"]  # random models: each wins somewhere
    assert all(e["bits"] < 0 for e in report["a_wins_spans"]) and all(
        e["bits"] > 0 for e in report["b_wins_spans"]
    )

    from starlette.testclient import TestClient

    from marin.ui.app import UiConfig, create_app

    rel = Path(run.output_path(lower(gap))).relative_to(tmp_path / "out")
    with TestClient(create_app(UiConfig(str(tmp_path / "out")))) as client:
        listing = client.get("/gaps").text
        assert f'href="/gaps/{rel}"' in listing and "gaps/small-small" in listing
        page = client.get(f"/gaps/{rel}").text
        assert "By byte class" in page and "Spans where" in page

    itself = json.loads((Path(run.output_path(lower(same))) / GAP_JSON).read_text())["total"]
    assert itself["value"] == 0.0 and itself["ci95"][0] <= 0.0 <= itself["ci95"][1]

    # `marin gap` over the two evaluations gives the same numbers (without spans: no per-byte losses kept)
    env = {**os.environ, "PATH": f"{REPO / '.venv' / 'bin'}:{os.environ['PATH']}"}
    outputs = [run.output_path(lower(e)) for e in evals]
    done = subprocess.run(
        ["marin", "gap", *outputs, "--format", "json"], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    cli = json.loads(done.stdout)
    assert cli["total"]["value"] == pytest.approx(total["value"], abs=1e-12)
    assert [c["value"] for c in cli["classes"]] == pytest.approx(
        [c["value"] for c in report["classes"]], abs=1e-12
    )
    assert cli["total"]["ci95"] == pytest.approx(total["ci95"], abs=1e-12)
    md = subprocess.run(["marin", "gap", *outputs], env=env, capture_output=True, text=True, timeout=300)
    assert md.returncode == 0 and "## By byte class" in md.stdout and "**total**" in md.stdout
    csv = subprocess.run(
        ["marin", "gap", *outputs, "--format", "csv"], env=env, capture_output=True, text=True, timeout=300
    )
    assert csv.stdout.splitlines()[1].startswith("total,total,")
    missing = subprocess.run(
        ["marin", "gap", outputs[0], str(tmp_path)], env=env, capture_output=True, text=True, timeout=300
    )
    assert (
        missing.returncode == 2
        and missing.stderr.startswith("error: ")
        and len(missing.stderr.splitlines()) == 1
    )


def test_documents_jsonl_holds_each_documents_bpb_and_its_split(exports, tmp_path, warm_cluster):
    from marin.evaluation.document_scores import read_document_scores

    small, _ = exports
    texts = TextDataset("gap_texts", (str(TEXTS),), domain_field="kind")
    ev = evaluate("eval/docs", model=small, datasets=[texts])
    out = (
        StepRunner(prefix=str(tmp_path / "out"), progress=False, cluster=warm_cluster)
        .run([ev])
        .output_path(lower(ev))
    )
    records = read_document_scores(out)
    results = read_results(out)
    assert len(records) == 40 and results.documents == "documents.jsonl"
    items = json.loads((Path(out) / "items.json").read_text())["perplexity"]["gap_texts"]
    assert [r.id for r in records] == items["ids"] and [r.nll for r in records] == items["nll"]
    for r in records:
        assert r.bpb == pytest.approx(r.nll / math.log(2) / r.bytes, rel=1e-12)
        assert sum(c["bytes"] for c in r.classes.values()) == r.bytes
        assert sum(c["nll"] for c in r.classes.values()) == pytest.approx(r.nll, rel=1e-9)
    pooled = sum(r.nll for r in records) / math.log(2) / sum(r.bytes for r in records)
    assert pooled == pytest.approx(results.perplexity.micro.bpb.value, rel=1e-12)
    shutil.rmtree(tmp_path / "out")


TUTORIAL_RUN = "marin run experiments/tutorials/perplexity_gap.py"
TUTORIAL_GAP = "marin gap evaluations/gap-bpe4k evaluations/gap-bpe1k"
TUTORIAL_GAP_JSON = "marin gap evaluations/gap-bpe4k evaluations/gap-bpe1k --format json"


@pytest.mark.slow  # two tokenizers and two trainings
def test_the_gap_tutorial_runs_as_documented(tmp_path):
    """docs/evaluation.md's "Where two models differ": its commands, verbatim."""
    env = {k: v for k, v in os.environ.items() if k != "MARIN_TOKENIZER"}
    env.update(MARIN_PREFIX=str(tmp_path), PATH=f"{REPO / '.venv' / 'bin'}:{env['PATH']}")

    def sh(command: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            command, shell=True, cwd=REPO, env=env, capture_output=True, text=True, timeout=1200
        )

    done = sh(TUTORIAL_RUN)
    assert done.returncode == 0, done.stderr[-3000:]
    table = sh(TUTORIAL_GAP)
    assert table.returncode == 0 and "## By byte class" in table.stdout and "## By domain" in table.stdout
    cli = json.loads(sh(TUTORIAL_GAP_JSON).stdout)
    (step,) = (tmp_path / "gaps").glob("bpe4k-bpe1k-*")
    report = json.loads((step / GAP_JSON).read_text())
    assert cli["total"]["value"] == pytest.approx(report["total"]["value"], abs=1e-9)
    assert sum(c["value"] for c in report["classes"]) == pytest.approx(report["total"]["value"], abs=1e-9)
    assert {d["name"] for d in report["domains"]} == {"gap_texts/mixed", "gap_texts/story"}
