"""Scoring with fastText, and cutting from attributes, against fastText's own predict loop.

    python benchmarks/curation_quality_scoring.py [--documents 20000 --rounds 3 --cut-documents 1000000]

Documents: graded web-synth articles written once as JSONL shards (4 shards). A fastText classifier
is trained once (train_quality_classifier's body). Interleaved rounds, each in a fresh interpreter
where it matters (the run_score_step and run_filter_by_score bodies, the users' code path):
- baseline: `model.predict(text, k=-1)` over the same texts, in memory, one core;
- score_1: run_score_step on 1 worker (`sync`); score_2: on 2 `processes` workers;
- cut: run_filter_by_score(keep_top=0.3) over the attributes, on `--cut-documents` documents
  (the shards repeated with fresh ids), against scoring those documents (extrapolated from score_1).
Prints JSON: documents/s of each, ratios (targets: score_1/baseline >= 0.8, score_2/score_1 >= 1.7,
cut/score <= 0.2) and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def write_documents(folder: str, documents: int, shards: int = 4) -> list[str]:
    from marin.data.corpus.web import main_text, truth

    rows = []
    i = 0
    while len(rows) < documents:
        t = truth(i, 0, 4)
        if t.kind == "clean":
            rows.append(json.dumps({"id": t.id, "text": main_text(i, 0, 4)[0]}) + "\n")
        i += 1
    paths = []
    for k in range(shards):
        path = os.path.join(folder, f"docs-{k}.jsonl")
        with open(path, "w") as f:
            f.writelines(rows[k::shards])
        paths.append(path)
    return paths


def stage(args) -> None:
    """One measured stage in this (fresh) interpreter; prints its seconds."""
    from zephyr import ZephyrConfig

    kind, work = args.stage, args.work
    spec = json.load(open(os.path.join(work, "spec.json")))
    if kind == "baseline":
        import fasttext

        model = fasttext.load_model(spec["model"])
        texts = [json.loads(line)["text"].replace("\n", " ") for p in spec["docs"] for line in open(p)]
        t0 = time.perf_counter()
        for text in texts:
            model.predict(text, k=-1)
        print(time.perf_counter() - t0)
        return
    from marin.curation.attributes import ScoreConfig, run_score_step
    from marin.curation.scorers import FastTextClassifier

    quiet = {"quiet": True}
    if kind in ("score_1", "score_2"):
        zconfig = (
            ZephyrConfig(backend="sync", **quiet)
            if kind == "score_1"
            else ZephyrConfig(num_workers=2, **quiet)
        )
        config = ScoreConfig(tuple(spec["docs"]), FastTextClassifier(spec["model"]), zephyr=zconfig)
        out = tempfile.mkdtemp(dir=work)
        t0 = time.perf_counter()
        run_score_step(config, out)
        print(time.perf_counter() - t0)
        return
    from marin.curation.cut import CutConfig, ScoreSet, run_filter_by_score

    config = CutConfig(
        tuple(spec["cut_docs"]),
        ScoreSet(spec["cut_scores"]),
        keep_top=0.3,
        zephyr=ZephyrConfig(num_workers=2, **quiet),
    )
    out = tempfile.mkdtemp(dir=work)
    t0 = time.perf_counter()
    run_filter_by_score(config, out)
    print(time.perf_counter() - t0)


def fresh(stage_name: str, work: str) -> float:
    done = subprocess.run(
        [sys.executable, __file__, "--stage", stage_name, "--work", work],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout.strip().splitlines()[-1])


def cut_inputs(work: str, docs: list[str], scores_dir: str, total: int) -> tuple[list[str], str]:
    """`total` documents and their attributes: the scored shards repeated with fresh ids."""
    import zstandard

    from marin.curation.attributes import attribute_files

    rows = [json.loads(line) for p in docs for line in open(p)]
    attrs = []
    for f in attribute_files(scores_dir):
        attrs += [
            json.loads(line)
            for line in zstandard.ZstdDecompressor().stream_reader(open(f, "rb")).read().splitlines()
        ]
    folder, attr_folder = os.path.join(work, "cut-docs"), os.path.join(work, "cut-scores")
    os.makedirs(folder), os.makedirs(attr_folder)
    shards, per = 8, total // 8
    cctx = zstandard.ZstdCompressor()
    paths = []
    n = 0
    for k in range(shards):
        doc_lines, attr_lines = [], []
        for _ in range(per):
            r, a = rows[n % len(rows)], attrs[n % len(attrs)]
            doc_lines.append(json.dumps({"id": f"d{n}", "text": r["text"]}) + "\n")
            attr_lines.append(json.dumps({"id": f"d{n}", "attributes": a["attributes"]}) + "\n")
            n += 1
        path = os.path.join(folder, f"docs-{k:03d}.jsonl.zst")
        open(path, "wb").write(cctx.compress("".join(doc_lines).encode()))
        open(os.path.join(attr_folder, f"part-{k:05d}-of-{shards:05d}.jsonl.zst"), "wb").write(
            cctx.compress("".join(attr_lines).encode())
        )
        paths.append(path)
    return paths, attr_folder


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--documents", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cut-documents", type=int, default=1_000_000)
    parser.add_argument("--stage")
    parser.add_argument("--work")
    args = parser.parse_args()
    if args.stage:
        stage(args)
        return
    from marin.curation.attributes import ScoreConfig, run_score_step
    from marin.curation.classifier import ClassifierConfig, run_train_classifier
    from marin.curation.scorers import FastTextClassifier
    from zephyr import ZephyrConfig

    work = tempfile.mkdtemp(prefix="bench-quality-")
    docs = write_documents(work, args.documents)
    pos, neg = os.path.join(work, "pos.jsonl"), os.path.join(work, "neg.jsonl")
    from marin.data.corpus.web import main_text, truth

    with open(pos, "w") as p, open(neg, "w") as n:
        for i in range(3000, 6000):
            t = truth(i, 1, 4)
            if t.kind == "clean" and t.grade in (0, 3):
                (p if t.grade == 3 else n).write(json.dumps({"text": main_text(i, 1, 4)[0]}) + "\n")
    run_train_classifier(ClassifierConfig((pos,), (neg,)), os.path.join(work, "clf"))
    model = os.path.join(work, "clf", "model.bin")
    scores_dir = os.path.join(work, "scores")
    run_score_step(
        ScoreConfig(tuple(docs), FastTextClassifier(model), zephyr=ZephyrConfig(backend="sync", quiet=True)),
        scores_dir,
    )
    cut_docs, cut_scores = cut_inputs(work, docs, scores_dir, args.cut_documents)
    json.dump(
        {"model": model, "docs": docs, "cut_docs": cut_docs, "cut_scores": cut_scores},
        open(os.path.join(work, "spec.json"), "w"),
    )
    times: dict[str, list[float]] = {"baseline": [], "score_1": [], "score_2": [], "cut": []}
    for _ in range(args.rounds):
        for name in times:
            times[name].append(fresh(name, work))
    best = {k: min(v) for k, v in times.items()}
    n = args.documents
    score_cut_size = best["score_1"] * args.cut_documents / n
    print(
        json.dumps(
            {
                "documents": n,
                "rate_docs_per_s": {k: n / best[k] for k in ("baseline", "score_1", "score_2")}
                | {"cut": args.cut_documents / best["cut"]},
                "seconds": times,
                "score_1_over_fasttext_predict": best["baseline"] / best["score_1"],
                "score_2_over_score_1": best["score_1"] / best["score_2"],
                "cut_over_scoring_same_documents": best["cut"] / score_cut_size,
                "targets": {
                    "score_1_over_fasttext_predict": ">= 0.8",
                    "score_2_over_score_1": ">= 1.7",
                    "cut_over_scoring_same_documents": "<= 0.2",
                },
                "loadavg": open("/proc/loadavg").read().split()[:3],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
