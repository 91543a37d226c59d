"""`train_quality_classifier`: a fastText classifier of positive against negative documents.

The order of work, each part a pure function of the inputs and the settings:
1. read the positives and negatives (the labelled sample, `max_documents` of each at most, in
   input order); a text on both sides is dropped from both, and sides that are mostly the same
   documents are an error (a classifier cannot tell them apart);
2. hold out `heldout_fraction` of each side, chosen by a seeded hash of the text (so a document
   is held out or not whatever the order or sharding of its input);
3. write the training lines (`__label__hq text` / `__label__lq text`, newlines as spaces) in a
   seeded shuffle, and train fastText on one thread with the seed (fastText's training is
   deterministic only on one thread: the same inputs and settings give the same `.bin` bytes);
4. score the held-out documents with the scorer that `score_documents` uses, and write
   `model.bin` (fastText's own format: `fasttext.load_model` reads it, and any published
   fastText classifier can take its place) and `report.json`: held-out AUC (DeLong interval),
   accuracy at 0.5 (Wilson interval), the score histogram of each class, the counts.
"""

from __future__ import annotations

import os
import random
import tempfile
from dataclasses import dataclass, field

import orjson

from marin.curation.documents import CurationError, read_records, resolve_inputs
from marin.curation.health import accuracy, auc, histogram
from marin.curation.scorers import MODEL_FILE, NEGATIVE_LABEL, POSITIVE_LABEL, FastTextClassifier
from marin.execution.keyed import key_fields
from zephyr.io import ShardStats

REPORT_FILE = "report.json"
MOSTLY_SHARED = 0.5  # sides sharing at least this share of the smaller one are "the same documents"


@dataclass(frozen=True)
class FastTextParams:
    """fastText's supervised settings (its `train_supervised` arguments, in Python spelling).

    Small defaults for small labelled samples (a model of (words + bucket) x dim floats); DCLM's
    classifier used dim 256 and 2M buckets on millions of documents."""

    dim: int = 16
    word_ngrams: int = 2
    epoch: int = 10
    lr: float = 0.5
    min_count: int = 1
    bucket: int = 200_000
    loss: str = "softmax"
    seed: int = 0

    def arguments(self) -> dict:
        return {
            "dim": self.dim,
            "wordNgrams": self.word_ngrams,
            "epoch": self.epoch,
            "lr": self.lr,
            "minCount": self.min_count,
            "bucket": self.bucket,
            "loss": self.loss,
            "seed": self.seed,
            "thread": 1,
            "verbose": 0,
        }


@dataclass(frozen=True)
class ClassifierConfig:
    """Train a fastText classifier of `positive` against `negative` documents (input names)."""

    positive: tuple[str, ...]
    negative: tuple[str, ...]
    params: FastTextParams = FastTextParams()
    max_documents: int | None = None  # of each side, the first in input order
    heldout_fraction: float = 0.1
    text_key: str = "text"
    bad_records: str = "fail"
    kind: str = field(default="train_quality_classifier", init=False)

    def describe(self) -> dict:
        return key_fields(self)

    def input_names(self) -> tuple[str, ...]:
        return self.positive + self.negative


def _texts(names: tuple[str, ...], config: ClassifierConfig) -> list[tuple[str, str]]:
    """(id, text) of each document of the inputs, in order, up to `max_documents`."""
    out: list[tuple[str, str]] = []
    stats = ShardStats()
    for shard in resolve_inputs(names):
        for where, line, record in read_records(shard, config.bad_records, stats):
            text = record.get(config.text_key)
            if isinstance(text, str) and text.strip():
                out.append((str(record.get("id", f"{where}:{line}")), text))
                if config.max_documents is not None and len(out) >= config.max_documents:
                    return out
    return out


def _labelled(config: ClassifierConfig) -> tuple[list[tuple[str, str]], list[tuple[str, str]], int]:
    positive, negative = _texts(config.positive, config), _texts(config.negative, config)
    for side, docs, names in (
        ("positive", positive, config.positive),
        ("negative", negative, config.negative),
    ):
        if not docs:
            raise CurationError(
                f"the {side} documents are empty: {', '.join(names)}; check the inputs and text_key"
            )
    shared = {t for _, t in positive} & {t for _, t in negative}
    if len(shared) >= MOSTLY_SHARED * min(len(positive), len(negative)):
        example = next(i for i, t in positive if t in shared)
        raise CurationError(
            f"positive and negative are mostly the same documents ({len(shared)} shared, e.g. id {example!r}); "
            "give the classifier two different sets to tell apart"
        )
    return (
        [d for d in positive if d[1] not in shared],
        [d for d in negative if d[1] not in shared],
        len(shared),
    )


def _heldout(text: str, fraction: float, seed: int) -> bool:
    import xxhash

    return (
        xxhash.xxh64_intdigest(text.encode("utf-8", "surrogatepass"), seed=seed) % 10_000 < fraction * 10_000
    )


def _line(label: str, text: str) -> str:
    return f"{label} {' '.join(text.split())}"


def run_train_classifier(config: ClassifierConfig, output_path: str) -> dict:
    """Train, evaluate on the held-out documents, write `model.bin` and `report.json` (see the module docstring)."""
    import storage

    positive, negative, shared = _labelled(config)
    storage.makedirs(output_path)
    seed = config.params.seed
    split = {
        label: (
            [t for _, t in docs if not _heldout(t, config.heldout_fraction, seed)],
            [t for _, t in docs if _heldout(t, config.heldout_fraction, seed)],
        )
        for label, docs in ((POSITIVE_LABEL, positive), (NEGATIVE_LABEL, negative))
    }
    for label, (_, held) in split.items():
        if not held:
            side = "positive" if label == POSITIVE_LABEL else "negative"
            raise CurationError(
                f"no held-out {side} document: raise heldout_fraction ({config.heldout_fraction}) "
                "or give more documents"
            )
    lines = [_line(label, t) for label, (train, _) in split.items() for t in train]
    random.Random(seed).shuffle(lines)
    try:
        import fasttext
    except ImportError:
        raise CurationError(
            'fastText is not installed: pip install -e ".[quality]" (scripts/setup.sh installs it)'
        ) from None
    with tempfile.TemporaryDirectory(prefix="marin-classifier-") as tmp:
        train_file = os.path.join(tmp, "train.txt")
        with open(train_file, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        model = fasttext.train_supervised(input=train_file, **config.params.arguments())
        local = os.path.join(tmp, MODEL_FILE)
        model.save_model(local)
        storage.upload(local, storage.join(output_path, MODEL_FILE))
    scorer = FastTextClassifier(storage.join(output_path, MODEL_FILE)).load()
    held_pos, held_neg = split[POSITIVE_LABEL][1], split[NEGATIVE_LABEL][1]
    pos_scores, neg_scores = scorer.scores(held_pos), scorer.scores(held_neg)
    correct = sum(s >= 0.5 for s in pos_scores) + sum(s < 0.5 for s in neg_scores)
    report = {
        "model": "fasttext",
        "labels": {"positive": POSITIVE_LABEL, "negative": NEGATIVE_LABEL},
        "config": config.describe(),
        "documents": {
            "positive": len(positive),
            "negative": len(negative),
            "shared_dropped": shared,
            "train": {"positive": len(split[POSITIVE_LABEL][0]), "negative": len(split[NEGATIVE_LABEL][0])},
            "heldout": {"positive": len(held_pos), "negative": len(held_neg)},
        },
        "heldout_auc": auc(pos_scores, neg_scores),
        "heldout_accuracy": accuracy(correct, len(pos_scores) + len(neg_scores)),
        "heldout_histograms": {"positive": histogram(pos_scores), "negative": histogram(neg_scores)},
    }
    storage.write_atomic(
        storage.join(output_path, REPORT_FILE), orjson.dumps(report, option=orjson.OPT_INDENT_2)
    )
    result = report["heldout_auc"]
    return {
        "headline": {
            "metric": "heldout_auc",
            "value": result["value"],
            "ci95": result["ci95"],
            "n": result["n"],
        },
        "heldout_accuracy": report["heldout_accuracy"],
        "documents": report["documents"],
    }
