"""Model-based quality: a fastText classifier as a step, scores kept as attributes, cuts from attributes,
health checks, on the graded web-synth whose hidden grades are the known answer."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
import zstandard

from marin.curation.health import auc
from marin.curation.scorers import FastTextClassifier, LanguageScore, RulesPass
from marin.data.corpus.web import main_text, truth
from marin.execution.errors import StepDefinitionError
from marin.execution.lazy import lower
from marin.execution.plan import PlanState
from marin.execution.step_runner import StepFailedError, StepRunner
from marin.experiment.curation import (
    dedup_exact,
    filter_by_score,
    score_documents,
    train_quality_classifier,
)
from zephyr import ZephyrConfig

fasttext = pytest.importorskip("fasttext")

GRADES = 4
SYNC = ZephyrConfig(backend="sync", quiet=True)


def read_dir(folder: str | Path) -> list[dict]:
    out = []
    for part in sorted(Path(folder).glob("part-*.jsonl.zst")):
        data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(part.read_bytes())).read()
        out += [json.loads(line) for line in data.splitlines()]
    return out


def graded_pages(seed: int, pages: int) -> list[tuple[dict, int]]:
    """The clean articles of a graded web-synth as records, with their hidden grades."""
    out = []
    for i in range(pages):
        t = truth(i, seed, GRADES)
        if t.kind == "clean":
            out.append(({"id": t.id, "text": main_text(i, seed, GRADES)[0]}, t.grade))
    return out


def write_jsonl(path: Path, records: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def run(prefix: Path, *handles):
    runner = StepRunner(prefix=str(prefix), progress=False)
    result = runner.run([lower(h) for h in handles])
    return [result.output_path(lower(h)) for h in handles]


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    """A small labelled sample (top-grade pages against bottom-grade ones) and held-out pages of every grade."""
    root = tmp_path_factory.mktemp("labelled")
    sample = graded_pages(seed=7, pages=1200)
    positive = write_jsonl(root / "positive.jsonl", [r for r, g in sample if g == GRADES - 1])
    negative = write_jsonl(root / "negative.jsonl", [r for r, g in sample if g == 0])
    heldout = graded_pages(seed=11, pages=1500)
    documents = write_jsonl(root / "heldout.jsonl", [r for r, _ in heldout])
    return {
        "root": root,
        "positive": positive,
        "negative": negative,
        "documents": documents,
        "heldout": heldout,
    }


@pytest.fixture(scope="module")
def trained(labelled):
    """The classifier trained once, and the held-out pages scored with it."""
    classifier = train_quality_classifier(
        "q/classifier", positive=labelled["positive"], negative=labelled["negative"]
    )
    scores = score_documents("q/scores", labelled["documents"], classifier=classifier)
    model_dir, scores_dir = run(labelled["root"] / "prefix", classifier, scores)
    return {
        "classifier": classifier,
        "scores": scores,
        "model_dir": Path(model_dir),
        "scores_dir": Path(scores_dir),
    }


def test_a_classifier_trained_on_a_small_labelled_sample_ranks_held_out_pages_by_their_hidden_grade(
    labelled, trained
):
    report = json.loads((trained["model_dir"] / "report.json").read_text())
    assert report["documents"]["train"]["positive"] < 300  # a small labelled sample
    lo, hi = report["heldout_auc"]["ci95"]
    assert lo <= report["heldout_auc"]["value"] <= hi and hi - lo > 0  # never a certain [1, 1]
    rows = read_dir(trained["scores_dir"])
    grades = [g for _, g in labelled["heldout"]]
    assert [r["id"] for r in rows] == [r["id"] for r, _ in labelled["heldout"]]
    scores = np.array([r["attributes"]["quality"] for r in rows])
    grades = np.array(grades)
    result = auc(scores[grades >= 2], scores[grades <= 1])
    assert result["value"] >= 0.9 and result["ci95"][0] >= 0.85, result
    for g in range(GRADES - 1):  # adjacent grades are ordered too
        assert auc(scores[grades == g + 1], scores[grades == g])["value"] >= 0.8
    artifact = json.loads((trained["scores_dir"] / ".artifact.json").read_text())
    assert artifact["result"]["headline"]["metric"] == "classifier heldout_auc"
    assert artifact["result"]["warnings"] == []


def test_the_same_run_twice_gives_the_same_model_bytes_and_scores(labelled, trained):
    again = train_quality_classifier(
        "q/classifier", positive=labelled["positive"], negative=labelled["negative"], version="again"
    )
    scores = score_documents("q/scores", labelled["documents"], classifier=again, version="again")
    model_dir, scores_dir = run(labelled["root"] / "prefix-again", again, scores)
    assert Path(model_dir, "model.bin").read_bytes() == (trained["model_dir"] / "model.bin").read_bytes()
    assert read_dir(scores_dir) == read_dir(trained["scores_dir"])


def test_our_scores_equal_fasttexts_own_predict_for_our_model_and_one_fasttext_trained(
    labelled, trained, tmp_path
):
    texts = [r["text"] for r, _ in labelled["heldout"]]

    def fasttext_scores(model, label):
        out = []
        for text in texts:
            labels, probs = model.predict(text.replace("\n", " "), k=-1)
            out.append(dict(zip(labels, probs, strict=True)).get(label, 0.0))
        return np.array(out)

    ours = np.array([r["attributes"]["quality"] for r in read_dir(trained["scores_dir"])])
    theirs = fasttext_scores(fasttext.load_model(str(trained["model_dir"] / "model.bin")), "__label__hq")
    np.testing.assert_allclose(ours, theirs, atol=1e-6)

    lines = tmp_path / "train.txt"
    sample = graded_pages(seed=3, pages=600)
    lines.write_text(
        "".join(f"__label__{'good' if g == 3 else 'bad'} {' '.join(r['text'].split())}\n" for r, g in sample)
    )
    model = fasttext.train_supervised(input=str(lines), wordNgrams=2, dim=10, epoch=3, thread=1, verbose=0)
    model.save_model(str(tmp_path / "theirs.bin"))
    scored = score_documents(
        "q/theirs",
        labelled["documents"],
        classifier=FastTextClassifier(str(tmp_path / "theirs.bin"), "__label__good"),
    )
    (folder,) = run(tmp_path / "prefix", scored)
    ours = np.array([r["attributes"]["quality"] for r in read_dir(folder)])
    np.testing.assert_allclose(ours, fasttext_scores(model, "__label__good"), atol=1e-6)


def test_a_cut_reads_attributes_only_and_a_new_keep_top_reruns_only_the_cut(labelled, trained):
    prefix = labelled["root"] / "prefix"
    top = filter_by_score("q/top", labelled["documents"], scores=trained["scores"], keep_top=0.3)
    (out,) = run(prefix, top)
    scores = {r["id"]: r["attributes"]["quality"] for r in read_dir(trained["scores_dir"])}
    kept = read_dir(out)
    assert len(kept) == round(0.3 * len(scores))
    assert min(scores[r["id"]] for r in kept) >= np.quantile(list(scores.values()), 0.69)
    assert [r["id"] for r in kept] == [i for i in scores if i in {r["id"] for r in kept}]  # document order

    model = trained["model_dir"] / "model.bin"
    saved = model.read_bytes()
    model.write_bytes(b"not a model")  # a cut that loaded the model would fail now
    try:
        wider = filter_by_score("q/top", labelled["documents"], scores=trained["scores"], keep_top=0.5)
        plan = StepRunner(prefix=str(prefix), progress=False).run([lower(wider)], dry_run=True)
        states = {s.name: s.state for s in plan.steps}
        assert states["q/scores"] == PlanState.CACHED and states["q/classifier"] == PlanState.CACHED
        assert states["q/top"] == PlanState.RUN_CHANGED
        (out,) = run(prefix, wider)
        assert len(read_dir(out)) == round(0.5 * len(scores))
    finally:
        model.write_bytes(saved)


def test_a_cut_counts_each_drop_with_examples_and_writes_the_rejected_in_document_order(labelled, trained):
    top = filter_by_score(
        "r/top", labelled["documents"], scores=trained["scores"], keep_top=0.3, rejected=True
    )
    (out,) = run(labelled["root"] / "prefix", top)
    order = [r["id"] for r in read_dir(trained["scores_dir"])]
    kept = read_dir(out)
    rejected = read_dir(Path(out) / "_rejected")
    assert [r["id"] for r in rejected] == [i for i in order if i not in {r["id"] for r in kept}]
    assert {r["rejected_by"] for r in rejected} == {"filter_by_score.below_top"}
    stats = json.loads(Path(out, "stats.json").read_text())
    assert stats["drops"] == {"filter_by_score.below_top": len(rejected)}
    examples = stats["dropped_examples"]["filter_by_score.below_top"]
    assert [(e["id"], e["where"]) for e in examples] == [(r["id"], r["rejected_at"]) for r in rejected[:3]]
    assert (stats["documents_in"], stats["documents_out"]) == (len(order), len(kept))
    assert stats["bytes_out"] == sum(len(r["text"].encode()) for r in kept)


def test_attributes_align_with_ids_after_upstream_dedup_and_resharding(labelled, trained, tmp_path):
    records = [r for r, _ in labelled["heldout"]]
    records = records + records[:40]  # duplicates for dedup to remove
    split = [write_jsonl(tmp_path / f"in-{k}.jsonl", records[k::3]) for k in range(3)]
    whole = [write_jsonl(tmp_path / "one.jsonl", records)]
    kept = []
    for name, files in (("three", split), ("one", whole)):
        deduped = dedup_exact(f"a/{name}/dedup", files, zephyr=SYNC)
        scores = score_documents(f"a/{name}/scores", deduped, classifier=trained["classifier"], zephyr=SYNC)
        top = filter_by_score(f"a/{name}/top", deduped, scores=scores, threshold=0.5, zephyr=SYNC)
        score_rows, top_rows, doc_rows = (
            read_dir(p) for p in run(labelled["root"] / "prefix", scores, top, deduped)
        )
        assert [r["id"] for r in score_rows] == [r["id"] for r in doc_rows]
        kept.append(sorted(r["id"] for r in top_rows))
    assert kept[0] == kept[1] and kept[0]


def test_several_attribute_sets_join_by_id_in_one_cut(labelled, trained, tmp_path):
    english = [r for r, _ in labelled["heldout"][:60]]
    german = [
        {
            "id": f"de-{k}",
            "text": "Der alte Fluss war sehr schön und die Leute in der Stadt haben es gesehen. " * 8,
        }
        for k in range(10)
    ]
    docs = write_jsonl(tmp_path / "mixed.jsonl", english + german)
    quality = score_documents("j/quality", docs, classifier=trained["classifier"])
    language = score_documents("j/language", docs, classifier=LanguageScore("en"), attribute="lang_en")
    rules = score_documents("j/rules", docs, classifier=RulesPass(), attribute="rules_pass")
    cut = filter_by_score("j/cut", docs, scores=quality, threshold=0.0, also={language: 0.65, rules: 1.0})
    (out, lang_dir) = run(labelled["root"] / "prefix", cut, language)
    assert {r["id"] for r in read_dir(out)} == {r["id"] for r in english}
    assert all(r["attributes"]["lang_en"] < 0.5 for r in read_dir(lang_dir) if r["id"].startswith("de-"))
    stats = json.loads(Path(out, "stats.json").read_text())
    assert stats["drops"] == {"filter_by_score.also:lang_en": 10}


def test_a_classifier_of_two_sources_warns_it_learned_the_source(labelled, tmp_path):
    web = labelled["documents"]
    stories = "marin://tinystories-synth?start=0&stop=400"
    classifier = train_quality_classifier("s/classifier", positive=stories, negative=web)
    scores = score_documents("s/scores", [stories, web], classifier=classifier)
    (folder,) = run(tmp_path / "prefix", scores)
    result = json.loads(Path(folder, ".artifact.json").read_text())["result"]
    assert any("learned the source" in w for w in result["warnings"]), result["warnings"]
    health = json.loads(Path(folder, "stats.json").read_text())["health"]
    assert health["source_epsilon_squared"]["value"] > 0.5 and set(health["sources"]) == {stories, web}


def test_constant_text_warns_that_the_scores_are_near_constant(trained, tmp_path):
    docs = write_jsonl(
        tmp_path / "same.jsonl", [{"id": str(k), "text": "The same words again."} for k in range(50)]
    )
    scores = score_documents("c/scores", docs, classifier=trained["classifier"])
    (folder,) = run(tmp_path / "prefix", scores)
    warnings = json.loads(Path(folder, ".artifact.json").read_text())["result"]["warnings"]
    assert any(w.startswith("near-constant quality within source") for w in warnings), warnings


def test_auc_and_its_interval_match_the_mann_whitney_statistic():
    from scipy.stats import mannwhitneyu

    rng = np.random.default_rng(0)
    pos, neg = rng.normal(1, 1, 80), rng.normal(0, 1, 120)
    result = auc(pos, neg)
    assert result["value"] == pytest.approx(mannwhitneyu(pos, neg).statistic / (80 * 120), abs=1e-12)
    assert result["ci95"][0] < result["value"] < result["ci95"][1]


def test_bad_inputs_are_one_line_each(labelled, trained, tmp_path):
    with pytest.raises(
        StepDefinitionError, match=r"keep_top is the share of documents kept and must be in \(0, 1\], got 1.5"
    ):
        filter_by_score("b/cut", labelled["documents"], scores=trained["scores"], keep_top=1.5)
    with pytest.raises(StepDefinitionError, match="positive and negative are the same documents"):
        train_quality_classifier("b/clf", positive=labelled["positive"], negative=[labelled["positive"]])
    copy = write_jsonl(
        tmp_path / "copy.jsonl", [json.loads(x) for x in Path(labelled["positive"]).read_text().splitlines()]
    )
    same = train_quality_classifier("b/clf", positive=labelled["positive"], negative=copy)
    with pytest.raises(StepFailedError, match="positive and negative are mostly the same documents"):
        run(tmp_path / "prefix", same)
    other = filter_by_score("b/cut", labelled["positive"], scores=trained["scores"], keep_top=0.3)
    with pytest.raises(StepFailedError, match="the scores do not match the documents"):
        run(tmp_path / "prefix", other)


def test_marin_status_shows_the_health_warnings(trained, tmp_path):
    import subprocess
    import sys

    docs = write_jsonl(
        tmp_path / "same.jsonl", [{"id": str(k), "text": "Constant words here."} for k in range(30)]
    )
    run(tmp_path / "prefix", score_documents("w/scores", docs, classifier=trained["classifier"]))
    done = subprocess.run(
        [str(Path(sys.executable).parent / "marin"), "status", "--json", str(tmp_path / "prefix")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    rows = {r["name"]: r for r in json.loads(done.stdout)}
    assert "warning: near-constant quality within source" in rows["w/scores"]["detail"]


def test_the_rank_statistics_equal_scipys():
    from scipy.stats import kruskal, spearmanr

    from marin.curation.health import ScoreColumns, score_health

    rng = np.random.default_rng(1)
    scores = np.round(rng.random(300), 2)  # ties
    lengths = rng.integers(100, 1000, 300)
    codes = np.arange(300) % 3
    health = score_health(ScoreColumns(scores, lengths, codes, ["s0", "s1", "s2"]), "quality")
    assert health["length_spearman"]["value"] == pytest.approx(
        spearmanr(scores, lengths).statistic, abs=1e-12
    )
    h = kruskal(*(scores[codes == k] for k in range(3))).statistic
    assert health["source_epsilon_squared"]["kruskal_h"] == pytest.approx(h, rel=1e-9)


def test_scoring_skips_records_without_text_and_names_one_without_an_id_by_its_line(trained, tmp_path):
    path = tmp_path / "mixed.jsonl"
    rows = [{"id": "a", "text": "Some words here."}, {"id": "b"}, {"text": "No id at all."}, [1, 2]]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "not json\n")
    scores = score_documents("m/scores", str(path), classifier=trained["classifier"], bad_records="skip")
    (folder,) = run(tmp_path / "prefix", scores)
    ids = [r["id"] for r in read_dir(folder)]
    assert ids[0] == "a" and ids[1].endswith("mixed.jsonl:3") and len(ids) == 2
    assert json.loads(Path(folder, "stats.json").read_text())["bad_records"] == 3
