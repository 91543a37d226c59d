"""Contamination measured from the lineage: which evaluation items the model saw in training.

`evaluate(..., contamination=True)` walks the model's lineage to its training data: from the train
step, through the dependencies each step's `.executor_info` records, to every token cache it was
trained on (and, for a model trained from another, that one's too). What the model saw is exactly
the `train` split of those caches, in the model's own tokens, so an item's overlap is counted in
the same tokens: each item's text is tokenized with the model's tokenizer, cut into n-grams of
`ngram` tokens (13, the decontamination step's n), and each n-gram is looked up among the training
data's. An item is contaminated when at least `min_overlap` of its n-grams occur in training.

The look-up scans the training tokens once, whatever the number of items: the items' n-grams are
hashed (a polynomial hash of the token ids, 64 bits) into one sorted array; each block of training
tokens is hashed with numpy, a pre-filter on the hash's top bits rules out nearly all of them, and
the rest are searched in the sorted array. Time grows with the training
tokens, and with items only through tokenizing them.

The report, per dataset and per task, gives the metric on all items, on the clean ones and on the
contaminated ones, each with its interval, and the differences all - clean and contaminated - clean
with paired intervals: one bootstrap resamples the items, and every replicate computes each subset
from the same draw.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

import storage
from marin.evaluation import stats
from marin.evaluation.errors import EvalDataError
from marin.evaluation.results import Contamination

_PRIME = np.uint64(0x9E3779B97F4A7C15)  # odd: the polynomial's base
_MIX = np.uint64(0xBF58476D1CE4E5B9)
_BLOCK = 1 << 24  # training tokens hashed at once
_FILTER_BITS = 25  # the pre-filter's size: 2^25 bytes


@dataclass(frozen=True)
class ContaminationConfig:
    """How an item's overlap with the training data is measured, and when it counts as contaminated."""

    ngram: int = 13
    min_overlap: float = 0.5

    def __post_init__(self) -> None:
        if isinstance(self.ngram, bool) or not isinstance(self.ngram, int) or self.ngram < 1:
            raise EvalDataError(f"contamination: ngram must be a positive int, got {self.ngram!r}")
        if not 0 < float(self.min_overlap) <= 1:
            raise EvalDataError(f"contamination: min_overlap must be in (0, 1], got {self.min_overlap!r}")


# -- the lineage ----------------------------------------------------------------------------------


def training_token_caches(model, path_of) -> tuple[str, ...]:
    """The token caches the model step was trained on: its dependencies' outputs, followed through
    every step that is not a token cache (a model it was initialised from, ...), as each step's
    `.executor_info` records them."""
    from marin.evaluation.model_source import ModelKind

    if model.kind != ModelKind.STEP:
        raise EvalDataError(
            f"contamination: model {model.label()!r} is not a step marin trained, so its training data is not "
            "known; evaluate a train_lm() handle or StepSpec"
        )
    return lineage_token_caches(path_of(model.location))


def lineage_token_caches(output_path: str) -> tuple[str, ...]:
    """Every token cache output found by following recorded dependencies from `output_path`, in order."""
    from marin.data.token_cache import LEDGER
    from marin.execution.artifact import read_info

    found: list[str] = []
    seen: set[str] = set()
    stack = [output_path]
    while stack:
        path = stack.pop()
        info = read_info(path)
        deps = [d.path for d in info.deps] if info is not None else []
        for dep in reversed(deps):
            if dep in seen:
                continue
            seen.add(dep)
            if storage.exists(storage.join(dep, LEDGER)):
                found.append(dep)
            else:
                stack.append(dep)
    return tuple(found)


# -- n-grams -----------------------------------------------------------------------------------------


def ngram_hashes(tokens: np.ndarray, n: int) -> np.ndarray:
    """The 64-bit hash of every window of `n` consecutive tokens (len(tokens) - n + 1 of them)."""
    count = len(tokens) - n + 1
    if count <= 0:
        return np.zeros(0, dtype=np.uint64)
    shifted = np.asarray(tokens).astype(np.uint64) + np.uint64(1)  # so that id 0 still counts
    out = shifted[:count].copy()
    with np.errstate(over="ignore"):
        for j in range(1, n):  # in place: n multiply-adds over the block, no temporaries
            np.multiply(out, _PRIME, out=out)
            np.add(out, shifted[j : j + count], out=out)
        np.bitwise_xor(out, out >> np.uint64(31), out=out)
        np.multiply(out, _MIX, out=out)
    return out


@dataclass(frozen=True)
class Overlap:
    """Per item: how many of its n-grams there are and how many occur in the training data."""

    ngrams: np.ndarray
    found: np.ndarray

    def share(self) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.ngrams > 0, self.found / np.maximum(self.ngrams, 1), 0.0)


def item_overlap(items: Sequence[Sequence[np.ndarray]], training: Iterable[np.ndarray], n: int) -> Overlap:
    """For each item (its texts' token ids), its n-grams and how many of them occur in any `training`
    block (blocks overlap by n - 1 tokens, or are whole documents, so no n-gram is missed)."""
    per_item = [
        np.unique(np.concatenate([ngram_hashes(t, n) for t in texts] or [np.zeros(0, np.uint64)]))
        for texts in items
    ]
    wanted = np.unique(np.concatenate(per_item)) if per_item else np.zeros(0, np.uint64)
    seen = np.zeros(len(wanted), dtype=bool)
    if len(wanted):
        # A byte per 2^39 of hash space says whether any wanted n-gram falls there: most training
        # n-grams are ruled out by one look-up, and only the rest are searched in the sorted array.
        maybe = np.zeros(1 << _FILTER_BITS, dtype=bool)
        maybe[wanted >> np.uint64(64 - _FILTER_BITS)] = True
        for block in training:
            hashes = ngram_hashes(block, n)
            hashes = hashes[maybe[hashes >> np.uint64(64 - _FILTER_BITS)]]
            at = np.searchsorted(wanted, hashes)
            at[at == len(wanted)] = 0
            seen[at[wanted[at] == hashes]] = True
    found = [int(seen[np.searchsorted(wanted, h)].sum()) if len(h) else 0 for h in per_item]
    return Overlap(np.array([len(h) for h in per_item]), np.array(found))


def training_blocks(caches: Sequence[str], n: int, split: str = "train") -> Iterable[np.ndarray]:
    """The tokens of each cache's `split`, in blocks that overlap by n - 1 tokens."""
    from marin.data.token_cache import TokenCache

    for path in caches:
        cache = TokenCache.open(path)
        if split not in cache.split_names:
            continue
        tokens = cache.split(split)
        for start in range(0, tokens.num_tokens, _BLOCK):
            yield tokens.tokens(max(0, start - (n - 1)), min(tokens.num_tokens, start + _BLOCK))


# -- the report --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Subsets:
    """A metric over all items, the clean ones and the contaminated ones, and the paired differences."""

    all: stats.Metric
    clean: stats.Metric
    contaminated: stats.Metric
    all_minus_clean: stats.Metric
    contaminated_minus_clean: stats.Metric
    p_value: float  # contaminated - clean, two-sided, from the paired bootstrap


def subsets(
    values: np.ndarray,
    weights: np.ndarray | None,
    flagged: np.ndarray,
    scale: float = 1.0,
    iters: int = stats.ITERS,
    seed: int = stats.SEED,
) -> Subsets:
    """A ratio of sums (scale * sum(values) / sum(weights); weights None: a mean) on all items, the
    clean and the contaminated, from one bootstrap over items (each replicate: every subset of one draw)."""
    v = np.asarray(values, dtype=np.float64)
    w = np.ones_like(v) if weights is None else np.asarray(weights, dtype=np.float64)
    c = np.asarray(flagged, dtype=bool).astype(np.float64)
    clean = 1.0 - c
    columns = np.stack([v, w, v * clean, w * clean, v * c, w * c], axis=1)
    sums = stats.resampled_sums(columns, iters, seed) if len(v) else np.zeros((0, 6))

    def value(members: np.ndarray) -> float:
        # as stats.ratio_estimate computes it, so "all" is the evaluation's own number, bit for bit
        den = float(w[members].sum())
        return scale * (float(v[members].sum()) / den) if den else float("nan")

    def ratio(num, den):
        with np.errstate(divide="ignore", invalid="ignore"):
            return scale * num / den

    everything = np.ones(len(v), dtype=bool)
    parts = {
        "all": (value(everything), ratio(sums[:, 0], sums[:, 1]), everything),
        "clean": (value(clean > 0), ratio(sums[:, 2], sums[:, 3]), clean > 0),
        "contaminated": (value(c > 0), ratio(sums[:, 4], sums[:, 5]), c > 0),
    }
    metrics = {}
    for name, (value, replicates, members) in parts.items():
        n = int(members.sum())
        if weights is None and _binary(v):  # an accuracy keeps its Wilson interval, as everywhere else
            metrics[name] = stats.accuracy(v[members]) if n else stats.Metric(float("nan"), None, None, 0)
        else:
            metrics[name] = stats.Estimate(float(value), replicates, n).metric()
    diff_all = stats.Estimate(
        float(parts["all"][0] - parts["clean"][0]), parts["all"][1] - parts["clean"][1], len(v)
    ).metric()
    diff_cont = stats.Estimate(
        float(parts["contaminated"][0] - parts["clean"][0]),
        parts["contaminated"][1] - parts["clean"][1],
        len(v),
    ).metric()
    replicates = parts["contaminated"][1] - parts["clean"][1]
    finite = replicates[np.isfinite(replicates)]
    if len(finite):
        below = (np.sum(finite <= 0) + 1) / (len(finite) + 1)
        above = (np.sum(finite >= 0) + 1) / (len(finite) + 1)
        p = float(min(1.0, 2 * min(below, above)))
    else:
        p = float("nan")
    return Subsets(metrics["all"], metrics["clean"], metrics["contaminated"], diff_all, diff_cont, p)


def _binary(values: np.ndarray) -> bool:
    return bool(np.all((values == 0) | (values == 1)))


def _strings(value) -> list[str]:
    """Every string in a harness document (its fields, lists of choices, ...), in order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


def contamination_report(
    config: ContaminationConfig,
    lineage: Sequence[str],
    tokenizer,
    docs,
    items: dict,
    harness: dict,
    eval_config,
) -> tuple[Contamination, dict[str, dict]]:
    """Each scored item's overlap with the training data, and every dataset's bits-per-byte and every
    task's metrics on all, clean and contaminated items; (the report, per group the items' flags)."""
    from marin.evaluation.document_scores import document_ids
    from marin.evaluation.results import (
        Aggregation,
        ContaminationGroup,
        MetricResult,
        SubsetMetrics,
        direction_of,
    )

    groups: list[tuple[str, list, list[list[np.ndarray]]]] = []  # (name, ids, per item: token arrays)

    def encode(text: str) -> np.ndarray:
        return np.asarray(tokenizer.encode(text, add_special_tokens=False), dtype=np.int64)

    if docs:
        ids = document_ids(docs)
        by_dataset: dict[str, list[int]] = {}
        for i, doc in enumerate(docs):
            by_dataset.setdefault(doc.dataset, []).append(i)
        for dataset, members in by_dataset.items():
            texts = [
                [np.asarray(docs[i].tokens, np.int64) if docs[i].tokens is not None else encode(docs[i].text)]
                for i in members
            ]
            groups.append((f"perplexity/{dataset}", [ids[i] for i in members], texts))
    for task, result in harness.items():
        rows = sorted(result.samples, key=lambda r: r["doc_id"])
        groups.append(
            (
                f"harness/{task}",
                [f"{r['doc_id']}:{str(r.get('doc_hash', ''))[:16]}" for r in rows],
                [[encode(s) for s in _strings(r.get("doc"))] for r in rows],
            )
        )
    overlap = item_overlap(
        [texts for _, _, group in groups for texts in group],
        training_blocks(lineage, config.ngram),
        config.ngram,
    )
    share = overlap.share()
    flagged = share >= config.min_overlap
    iters, seed = eval_config.bootstrap_iters, eval_config.bootstrap_seed

    def subset_metrics(name: str, aggregation: Aggregation, *args) -> SubsetMetrics:
        found = subsets(*args, iters=iters, seed=seed)
        direction = direction_of(name)

        def result(metric: stats.Metric) -> MetricResult:
            return MetricResult.of(metric, direction, aggregation)

        return SubsetMetrics(
            all=result(found.all),
            clean=result(found.clean),
            contaminated=result(found.contaminated),
            all_minus_clean=result(found.all_minus_clean),
            contaminated_minus_clean=result(found.contaminated_minus_clean),
            p_value=found.p_value if math.isfinite(found.p_value) else None,
        )

    report: dict[str, dict] = {"perplexity": {}, "harness": {}}
    flags: dict[str, dict] = {}
    start = 0
    for name, ids, texts in groups:
        stop = start + len(texts)
        mask, shares, counts = flagged[start:stop], share[start:stop], overlap.ngrams[start:stop]
        start = stop
        flags[name] = {
            "ids": ids,
            "overlap": [float(x) for x in shares],
            "ngrams": [int(x) for x in counts],
            "flagged": [bool(x) for x in mask],
        }
        kind, _, what = name.partition("/")
        metrics: dict[str, SubsetMetrics] = {}
        if kind == "perplexity":
            data = items["perplexity"][what]
            metrics["bpb"] = subset_metrics(
                "bpb", Aggregation.RATIO, np.asarray(data.nll), np.asarray(data.bytes), mask, 1 / math.log(2)
            )
        else:
            for metric, scores in items["harness"][what].items():
                if scores.transform not in ("mean", "bits_per_byte"):
                    continue  # perplexities: exp of a ratio; their bits-per-byte says the same
                weights = None if scores.weights is None else np.asarray(scores.weights)
                aggregation = Aggregation.MEAN if weights is None else Aggregation.RATIO
                metrics[metric] = subset_metrics(
                    metric, aggregation, np.asarray(scores.values), weights, mask, float(scores.scale)
                )
        report[kind][what] = ContaminationGroup(
            items=len(ids), contaminated=int(mask.sum()), unchecked=int((counts == 0).sum()), metrics=metrics
        )
    return (
        Contamination(
            ngram=config.ngram,
            min_overlap=config.min_overlap,
            lineage=list(lineage),
            training_tokens=training_tokens(lineage),
            perplexity=report["perplexity"],
            harness=report["harness"],
        ),
        flags,
    )


def training_tokens(caches: Sequence[str], split: str = "train") -> int:
    """How many tokens the caches' `split` hold (what the look-up scanned)."""
    from marin.data.token_cache import TokenCache

    total = 0
    for path in caches:
        cache = TokenCache.open(path)
        if split in cache.split_names:
            total += cache.split(split).num_tokens
    return total
