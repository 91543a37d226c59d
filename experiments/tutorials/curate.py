"""Curation tutorial: web pages in, a trained nano model out, and what each stage removed.

    python -m experiments.tutorials.curate

web-synth (the embedded synthetic web corpus) -> extract_text -> filter_language -> filter_quality
-> dedup_fuzzy -> tokenized -> train_lm (llama_nano) -> evaluate. Offline, on CPU, a few minutes.
At the end it compares each stage's removals with the ground truth the corpus generator recorded.
Sizes: CURATE_PAGES (default 3000 pages) and CURATE_TRAIN_STEPS (default 60).
"""

from __future__ import annotations

import io
import json
import os
from collections import Counter
from pathlib import Path

from experiments.llama import llama_nano
from experiments.marin_tokenizer import marin_tokenizer
from fray.cluster import ResourceConfig
from marin.data.corpus.web import truth
from marin.execution.artifact import read_artifact
from marin.execution.lazy import lower
from marin.execution.step_runner import StepRunner
from marin.experiment.curation import dedup_fuzzy, extract_text, filter_language, filter_quality
from marin.experiment.data import tokenized
from marin.experiment.evaluate import evaluate
from marin.experiment.train import train_lm
from marin.training.optim import AdamConfig

PAGES = int(os.environ.get("CURATE_PAGES", "3000"))
TRAIN_STEPS = int(os.environ.get("CURATE_TRAIN_STEPS", "60"))
THRESHOLD = 0.8

pages_text = extract_text("curated/web-synth/text", f"marin://web-synth?pages={PAGES}")
english = filter_language("curated/web-synth/english", pages_text, languages=("en",), min_score=0.65)
quality = filter_quality(
    "curated/web-synth/quality", english, rules=("gopher_quality", "gopher_repetition", "c4", "fineweb")
)
deduped = dedup_fuzzy("curated/web-synth/dedup", quality, threshold=THRESHOLD)

curated_tokens = tokenized(
    "tokenized/web-synth-curated", source=deduped, tokenizer=marin_tokenizer, validation_fraction=0.1
)

model = train_lm(
    name="checkpoints/marin-nano-web-synth",
    model=llama_nano,
    optimizer=AdamConfig(learning_rate=6e-4, weight_decay=0.1),
    datasets={curated_tokens: 1.0},
    batch_size=4,
    seq_len=512,
    num_train_steps=TRAIN_STEPS,
    resources=ResourceConfig.with_cpu(),
)

evaluation = evaluate(name="evaluations/marin-nano-web-synth", model=model, datasets=[curated_tokens])


def read_ids(folder: str) -> set[str]:
    """The ids of the documents a curation step kept."""
    import zstandard

    ids: set[str] = set()
    for part in sorted(Path(folder).glob("part-*.jsonl.zst")):
        data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(part.read_bytes())).read()
        ids.update(json.loads(line)["id"] for line in data.splitlines())
    return ids


def report(
    stage: str, before: set[str], after: set[str], expected: set[str], stats: dict, kinds: dict
) -> dict:
    """Removed vs expected-to-remove among the documents that reached this stage."""
    removed = before - after
    target = expected & before
    row = {
        "stage": stage,
        "in": len(before),
        "removed": len(removed),
        "expected": len(target),
        "caught": len(removed & target),
        "false_removals": len(removed - target),
        "others_by_kind": dict(Counter(kinds[i] for i in removed - target)),
        "drops": stats["drops"],
    }
    print(
        f"{stage:<9} in {row['in']:>5}  removed {row['removed']:>5}  expected {row['expected']:>5}  "
        f"caught {row['caught']:>5}  others {row['others_by_kind']}  top reasons "
        f"{dict(Counter(stats['drops']).most_common(3))}"
    )
    return row


def main() -> list[dict]:
    steps = [lower(h) for h in (pages_text, english, quality, deduped)]
    run = StepRunner().run([lower(evaluation)] + steps)
    outputs = [run.output_path(s) for s in steps]
    stats = [json.loads(Path(p, "stats.json").read_text()) for p in outputs]
    kept = [read_ids(p) for p in outputs]
    truths = [truth(i) for i in range(PAGES)]
    everything = {t.id for t in truths}
    kinds = {t.id: t.kind for t in truths}
    foreign = {t.id for t in truths if t.kind == "foreign"}
    spam = {t.id for t in truths if t.kind == "spam"}
    # a duplicate is expected to go when its original is still there to keep (or is itself kept upstream)
    dups = {
        t.id
        for t in truths
        if t.kind in ("exact_dup", "near_dup") and t.jaccard >= THRESHOLD and t.dup_of in kept[2]
    }
    print(
        f"\nweb-synth: {PAGES} pages; ground truth: {len(foreign)} foreign, {len(spam)} spam, "
        f"{sum(t.kind in ('exact_dup', 'near_dup') for t in truths)} duplicates"
    )
    rows = [
        report("extract", everything, kept[0], set(), stats[0], kinds),
        report("language", kept[0], kept[1], foreign, stats[1], kinds),
        report("quality", kept[1], kept[2], spam, stats[2], kinds),
        report("dedup", kept[2], kept[3], dups, stats[3], kinds),
    ]
    train = read_artifact(run.output_path(lower(model))).result
    scores = read_artifact(run.output_path(lower(evaluation))).result
    print(
        f"\ntrained on {len(kept[3])} curated pages: final loss {train['final_loss']:.3f} nats/token; "
        f"evaluation {scores['headline']['metric']} = {scores['headline']['value']:.3f}"
    )
    return rows


if __name__ == "__main__":
    main()
