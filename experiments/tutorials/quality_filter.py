"""Does a quality filter help? The data ablation: the top 30% by a classifier against a random 30%.

    python -m experiments.tutorials.quality_filter

A graded web-synth (`grades=4`: each article has a hidden grade, a share of its sentences
word-shuffled, which no rule sees) is curated (extract_text -> filter_language -> filter_quality).
A fastText classifier learns top-grade reference pages (another seed of the corpus) against random
web pages, scores the curated pages (attributes; the text is not copied), and `filter_by_score`
keeps the top 30%. The control is a random 30% of the same size (`keep_top` over `RandomScore`).
Nano models train on each cut with several seeds (model seed and random cut together), and every
model is evaluated on held-out top-grade pages. The comparison is `marin compare`'s, at the level of
configurations (the arms of a cut differ only in seeds, so they are its replicates): each cut's
mean over seeds with an interval counting seed and item noise, the seed standard deviation, and the
difference with its interval and p-value (docs/evaluation.md, "What a difference means"). Sizes:
QUALITY_PAGES (default 3000), QUALITY_SEEDS (3), QUALITY_TRAIN_STEPS (60).
"""

from __future__ import annotations

import json
import os
from functools import partial

import storage
from experiments.llama import llama_nano
from experiments.marin_tokenizer import marin_tokenizer
from fray.cluster import ResourceConfig
from marin.curation.scorers import RandomScore
from marin.data.corpus.web import main_text, truth
from marin.evaluation.compare import compare
from marin.evaluation.compare_render import render
from marin.evaluation.comparison import Comparison
from marin.execution.artifact import read_artifact
from marin.execution.lazy import lower
from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec
from marin.experiment.curation import (
    extract_text,
    filter_by_score,
    filter_language,
    filter_quality,
    score_documents,
    train_quality_classifier,
)
from marin.experiment.data import tokenized
from marin.experiment.evaluate import evaluate
from marin.experiment.train import train_lm
from marin.training.optim import AdamConfig

PAGES = int(os.environ.get("QUALITY_PAGES", "3000"))
SEEDS = tuple(range(int(os.environ.get("QUALITY_SEEDS", "3"))))
TRAIN_STEPS = int(os.environ.get("QUALITY_TRAIN_STEPS", "60"))
GRADES = 4
KEEP = 0.3
LABELLED = max(100, PAGES // 10)  # reference pages of each kind the classifier learns from


def write_pages(seed: int, pages: int, grade: int | None, output_path: str) -> dict:
    """The clean articles of pages [0, pages) of a graded web-synth (only those of `grade`, when given) as JSONL."""
    rows = []
    for i in range(pages):
        t = truth(i, seed, GRADES)
        if t.kind == "clean" and (grade is None or t.grade == grade):
            rows.append(json.dumps({"id": t.id, "text": main_text(i, seed, GRADES)[0]}) + "\n")
    storage.write_atomic(storage.join(output_path, "pages.jsonl"), "".join(rows).encode())
    return {"headline": {"metric": "documents", "value": len(rows)}}


def pages_step(name: str, seed: int, pages: int, grade: int | None) -> StepSpec:
    return StepSpec(
        name=name,
        fn=partial(write_pages, seed, pages, grade),
        hash_attrs={"seed": seed, "pages": pages, "grade": grade, "grades": GRADES},
    )


# the data: a graded web corpus, curated by the rules
text = extract_text("curated/graded/text", f"marin://web-synth?pages={PAGES}&grades={GRADES}")
english = filter_language("curated/graded/english", text)
curated = filter_quality("curated/graded/quality", english)

# the classifier: top-grade reference pages against random web pages, both from another seed
reference = pages_step("data/graded/reference", seed=1, pages=LABELLED * 6, grade=GRADES - 1)
random_web = pages_step("data/graded/random-web", seed=1, pages=LABELLED * 2, grade=None)
classifier = train_quality_classifier("classifiers/graded", positive=reference, negative=random_web)
quality = score_documents("attributes/graded/quality", curated, classifier=classifier, source_key="url")
top = filter_by_score("curated/graded/top30", curated, scores=quality, keep_top=KEEP)

# the evaluation data: held-out top-grade pages of a third seed
heldout = tokenized(
    "tokenized/graded/heldout",
    source=pages_step("data/graded/heldout", seed=2, pages=max(300, PAGES // 5), grade=GRADES - 1),
    tokenizer=marin_tokenizer,
    validation_fraction=0.5,
)


def arm(label: str, data, seed: int):
    """A nano model trained on one cut with one seed, and its evaluation on the held-out pages."""
    tokens = tokenized(f"tokenized/graded/{label}-{seed}", source=data, tokenizer=marin_tokenizer)
    model = train_lm(
        name=f"checkpoints/graded/{label}-{seed}",
        model=llama_nano,
        optimizer=AdamConfig(learning_rate=6e-4, weight_decay=0.1),
        datasets={tokens: 1.0},
        batch_size=4,
        seq_len=256,
        num_train_steps=TRAIN_STEPS,
        seed=seed,
        cpu_threads=1,
        resources=ResourceConfig.with_cpu(),
    )
    return evaluate(f"evaluations/graded/{label}-{seed}", model=model, datasets=[heldout])


def random_cut(seed: int):
    scores = score_documents(
        f"attributes/graded/random-{seed}", curated, classifier=RandomScore(seed), attribute="random"
    )
    return filter_by_score(f"curated/graded/random30-{seed}", curated, scores=scores, keep_top=KEEP)


evaluations = {
    "top30": [arm("top30", top, seed) for seed in SEEDS],
    "random30": [arm("random30", random_cut(seed), seed) for seed in SEEDS],
}


def main() -> Comparison:
    steps = [lower(e) for arms in evaluations.values() for e in arms] + [lower(top)]
    run = StepRunner().run(steps)
    scored = read_artifact(run.output_path(lower(quality))).result
    cut = read_artifact(run.output_path(lower(top))).result
    print(
        f"classifier held-out AUC {scored['headline']['value']:.3f} "
        f"[{scored['headline']['ci95'][0]:.3f}, {scored['headline']['ci95'][1]:.3f}] (n={scored['headline']['n']}); "
        f"health warnings: {scored['warnings'] or 'none'}"
    )
    print(f"curated pages {cut['documents_in']}; top 30% and random 30% keep {cut['documents_out']} each")
    # the configuration-level comparison of `marin compare`: the arms' keys differ only in seeds (the
    # model's, and the random cut's), so the seeds of each cut are recognised as replicates
    metric = read_artifact(run.output_path(lower(evaluations["top30"][0]))).result["headline"]["metric"]
    paths = [run.output_path(lower(e)) for arms in evaluations.values() for e in arms]
    comparison = compare(paths, metrics=(metric,))
    print(render(comparison), end="")
    return comparison


if __name__ == "__main__":
    main()
