"""Scoring with fastText as users run it, against fastText's own predict loop; and a cut from attributes.

    .venv/bin/python benchmarks/curation_quality_scoring.py [--documents 200000 --rounds 3 --cut-documents 1000000]

Documents: 20,000 distinct graded web-synth articles (~1.6 kB each), repeated with fresh ids to
`--documents`, as 8 JSONL files; a fastText classifier trained once (train_quality_classifier's body).
Each measurement is a fresh interpreter (bytecode cache on, as a user's), the kinds interleaved
within each round, the best of `--rounds`:

- predict: `model.predict(text.replace("\\n", " "), k=-1)` over the same texts, read into memory
  beforehand (only the loop is timed): fastText's own speed, one core (the goal's baseline);
- plain_loop: the script a user would write instead of the step: load the model, read the JSONL
  files with orjson, predict each text, write its score as a JSONL line;
- step_1 / step_2: `StepRunner().run([score_documents(..., resources=ResourceConfig.with_cpu(n))])`
  on the default cluster, timed around `run()`: everything the step does (a worker process, its
  imports, zephyr's workers, one model load per worker, reading the JSONL, scoring, writing the
  attribute shards, the health report);
- startup: step_1 on 100 documents in each of the 8 files, the step's fixed cost (the figures at
  size include it; the ratios marked `startup_removed` take it out);
- cut: `filter_by_score(keep_top=0.3)` over `--cut-documents` documents and their attributes (the
  scored shards repeated with fresh ids), on the default cluster (every free core), against scoring
  as many at step_1's rate, start-up included (`cut_over_scoring_same_documents`, the goal's figure);
- cut_1: the same cut given one core, as the scoring had (`cut_1_core_over_scoring_same_documents`),
  and against scoring that pays its start-up once rather than once per 200,000 documents
  (`cut_1_core_over_scoring_startup_once`): the like-for-like readings of the same goal.

Prints one JSON object: seconds of each round, documents/s, the ratios with their goals
(step_1 / predict >= 0.8, step_2 / step_1 >= 1.7, cut / scoring <= 0.2), the same ratios with the
fixed start-up taken out, step_1 against the plain loop, and the load average. The goals are
judged on the figures at size, start-up included.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

from fresh import best_of, fresh_json, load_average

SHARDS = 8
DISTINCT = 20_000
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "ZEPHYR_NUM_WORKERS")


def distinct_texts(count: int, seed: int = 0) -> list[str]:
    from marin.data.corpus.web import main_text, truth

    texts, i = [], 0
    while len(texts) < count:
        if truth(i, seed, 4).kind == "clean":
            texts.append(main_text(i, seed, 4)[0])
        i += 1
    return texts


def write_documents(folder: str, texts: list[str], documents: int, shards: int = SHARDS) -> list[str]:
    """`documents` rows {"id", "text"}, the texts repeated in turn, dealt over `shards` JSONL files."""
    import orjson

    os.makedirs(folder)
    paths = [os.path.join(folder, f"docs-{k}.jsonl") for k in range(shards)]
    files = [open(p, "wb") for p in paths]
    for n in range(documents):
        files[n % shards].write(
            orjson.dumps({"id": f"d{n}", "text": texts[n % len(texts)]}, option=orjson.OPT_APPEND_NEWLINE)
        )
    for f in files:
        f.close()
    return paths


def train_classifier(work: str) -> str:
    from marin.curation.classifier import ClassifierConfig, run_train_classifier
    from marin.data.corpus.web import main_text, truth

    pos, neg = os.path.join(work, "pos.jsonl"), os.path.join(work, "neg.jsonl")
    with open(pos, "w") as p, open(neg, "w") as n:
        for i in range(3000, 6000):
            t = truth(i, 1, 4)
            if t.kind == "clean" and t.grade in (0, 3):
                (p if t.grade == 3 else n).write(json.dumps({"text": main_text(i, 1, 4)[0]}) + "\n")
    run_train_classifier(ClassifierConfig((pos,), (neg,)), os.path.join(work, "clf"))
    return os.path.join(work, "clf", "model.bin")


def cut_inputs(work: str, docs: list[str], scores_dir: str, total: int) -> tuple[list[str], str]:
    """`total` documents and their attributes: the scored documents repeated with fresh ids."""
    import orjson
    import zstandard

    from marin.curation.attributes import attribute_files

    texts = [orjson.loads(line)["text"] for p in docs for line in open(p, "rb")]
    attrs = []
    for f in attribute_files(scores_dir):
        with open(f, "rb") as raw:
            data = zstandard.ZstdDecompressor().stream_reader(raw).read()
        attrs += [orjson.loads(line)["attributes"] for line in data.splitlines()]
    folder, attr_folder = os.path.join(work, "cut-docs"), os.path.join(work, "cut-scores")
    os.makedirs(folder), os.makedirs(attr_folder)
    cctx, paths, n = zstandard.ZstdCompressor(), [], 0
    for k in range(SHARDS):
        doc_lines, attr_lines = [], []
        for _ in range(total // SHARDS):
            doc_lines.append(orjson.dumps({"id": f"c{n}", "text": texts[n % len(texts)]}))
            attr_lines.append(orjson.dumps({"id": f"c{n}", "attributes": attrs[n % len(attrs)]}))
            n += 1
        path = os.path.join(folder, f"docs-{k:03d}.jsonl.zst")
        with open(path, "wb") as f:
            f.write(cctx.compress(b"\n".join(doc_lines) + b"\n"))
        with open(os.path.join(attr_folder, f"part-{k:05d}-of-{SHARDS:05d}.jsonl.zst"), "wb") as f:
            f.write(cctx.compress(b"\n".join(attr_lines) + b"\n"))
        paths.append(path)
    return paths, attr_folder


def plain_loop(model_path: str, docs: list[str], out: str) -> float:
    """Seconds of the loop a script would write: load the model, read each JSONL file, predict each
    text, write each document's score as a JSONL line."""
    import fasttext
    import orjson

    start = time.perf_counter()
    model = fasttext.load_model(model_path)
    os.makedirs(out)
    for k, path in enumerate(docs):
        with open(path, "rb") as lines, open(os.path.join(out, f"{k}.jsonl"), "wb") as f:
            for line in lines:
                doc = orjson.loads(line)
                labels, probs = model.predict(doc["text"].replace("\n", " "), k=-1)
                score = float(probs[labels.index("__label__hq")])
                f.write(orjson.dumps({"id": doc["id"], "quality": score}, option=orjson.OPT_APPEND_NEWLINE))
    return time.perf_counter() - start


def child(kind: str, prefix: str, spec: dict) -> None:
    """One measured run in this fresh interpreter; prints {"seconds": ...}."""
    if kind == "predict":
        import fasttext
        import orjson

        model = fasttext.load_model(spec["model"])
        texts = [orjson.loads(line)["text"] for p in spec["docs"] for line in open(p, "rb")]
        start = time.perf_counter()
        for text in texts:
            model.predict(text.replace("\n", " "), k=-1)
        print(json.dumps({"seconds": time.perf_counter() - start}))
        return
    if kind == "plain_loop":
        print(
            json.dumps({"seconds": plain_loop(spec["model"], spec["docs"], os.path.join(prefix, "scores"))})
        )
        return
    from fray.cluster import ResourceConfig
    from marin.execution.lazy import lower
    from marin.execution.step_runner import StepRunner
    from marin.experiment.curation import filter_by_score, score_documents

    if kind in ("cut", "cut_1"):
        resources = ResourceConfig.with_cpu(1) if kind == "cut_1" else None
        handle = filter_by_score(
            "bench/top30", spec["cut_docs"], scores=spec["cut_scores"], keep_top=0.3, resources=resources
        )
    else:
        cores = 2 if kind == "step_2" else 1
        docs = spec["tiny_docs"] if kind == "startup" else spec["docs"]
        handle = score_documents(
            "bench/scores", docs, classifier=spec["model"], resources=ResourceConfig.with_cpu(cores)
        )
    start = time.perf_counter()
    result = StepRunner(prefix=prefix, progress=False).run([lower(handle)])
    seconds = time.perf_counter() - start
    assert set(result.outcomes.values()) == {"succeeded"}, result.outcomes
    print(json.dumps({"seconds": seconds}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--documents", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cut-documents", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="20,000 documents, 1 round: check, do not quote")
    parser.add_argument("--child", nargs=3, metavar=("KIND", "PREFIX", "SPEC"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, prefix, spec = args.child
        child(kind, prefix, json.load(open(spec)))
        return
    if args.quick:
        args.documents, args.rounds, args.cut_documents = 20_000, 1, 200_000
    from marin.curation.attributes import ScoreConfig, run_score_step
    from marin.curation.scorers import FastTextClassifier
    from zephyr import ZephyrConfig

    work = tempfile.mkdtemp(prefix="bench-quality-")
    try:
        texts = distinct_texts(min(DISTINCT, args.documents))
        docs = write_documents(os.path.join(work, "docs"), texts, args.documents)
        tiny = write_documents(os.path.join(work, "tiny"), texts, 100 * SHARDS)
        model = train_classifier(work)
        scores_dir = os.path.join(work, "scores")
        run_score_step(
            ScoreConfig(tuple(docs), FastTextClassifier(model), zephyr=ZephyrConfig(quiet=True)), scores_dir
        )
        cut_docs, cut_scores = cut_inputs(work, docs, scores_dir, args.cut_documents)
        spec_file = os.path.join(work, "spec.json")
        spec = {
            "model": model,
            "docs": docs,
            "tiny_docs": tiny,
            "cut_docs": cut_docs,
            "cut_scores": cut_scores,
        }
        with open(spec_file, "w") as f:
            json.dump(spec, f)
        env = {k: v for k, v in os.environ.items() if k not in THREAD_VARS}
        os.environ.clear()
        os.environ.update(env)  # the cluster, not the caller, tells each step how many cores it has
        load_before = load_average()
        times: dict[str, list[float]] = {}
        runs = iter(range(1_000_000))

        def measure(kind: str) -> float:
            prefix = os.path.join(work, f"run-{kind}-{next(runs)}")
            seconds = fresh_json(__file__, "--child", kind, prefix, spec_file)["seconds"]
            shutil.rmtree(prefix, ignore_errors=True)
            times.setdefault(kind, []).append(round(seconds, 3))
            return seconds

        best = best_of(
            args.rounds, ["predict", "plain_loop", "step_1", "step_2", "startup", "cut", "cut_1"], measure
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    n = args.documents
    step_1, step_2, predict, startup = best["step_1"], best["step_2"], best["predict"], best["startup"]
    score_1 = predict / step_1
    scaling = step_1 / step_2
    scoring_cut_documents = step_1 * args.cut_documents / n
    cut = best["cut"] / scoring_cut_documents
    cut_1 = best["cut_1"] / scoring_cut_documents
    cut_1_startup_once = best["cut_1"] / (startup + (step_1 - startup) * args.cut_documents / n)
    print(
        json.dumps(
            {
                "benchmark": "curation_quality_scoring",
                "quick": args.quick,
                "documents": n,
                "distinct_texts": len(texts),
                "cut_documents": args.cut_documents,
                "fresh_interpreter_per_run": True,
                "rounds_best_of": args.rounds,
                "load_average_before": load_before,
                "load_average_after": load_average(),
                "seconds": times,
                "docs_per_s": {
                    "fasttext_predict": round(n / predict),
                    "plain_loop": round(n / best["plain_loop"]),
                    "step_1_core": round(n / step_1),
                    "step_2_cores": round(n / step_2),
                    "cut": round(args.cut_documents / best["cut"]),
                    "cut_1_core": round(args.cut_documents / best["cut_1"]),
                },
                "step_startup_s": round(startup, 3),
                "step_1_over_predict": round(score_1, 3),
                "step_1_over_predict_startup_removed": round(predict / (step_1 - startup), 3),
                "step_1_over_plain_loop": round(best["plain_loop"] / step_1, 3),
                "step_2_over_step_1": round(scaling, 3),
                "step_2_over_step_1_startup_removed": round((step_1 - startup) / (step_2 - startup), 3),
                "cut_over_scoring_same_documents": round(cut, 3),
                "cut_1_core_over_scoring_same_documents": round(cut_1, 3),
                "cut_1_core_over_scoring_startup_once": round(cut_1_startup_once, 3),
                "goals": {
                    "step_1_over_predict": ">= 0.8",
                    "step_2_over_step_1": ">= 1.7",
                    "cut_over_scoring_same_documents": "<= 0.2",
                },
                "score_1_core_goal_met": score_1 >= 0.8,
                "score_2_cores_goal_met": scaling >= 1.7,
                "cut_goal_met": cut <= 0.2,
                "cut_1_core_goal_met": cut_1_startup_once <= 0.2,
            }
        )
    )


if __name__ == "__main__":
    sys.exit(main())
