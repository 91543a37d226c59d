"""How well MinHash-LSH dedup finds near duplicates, against exact Jaccard similarities.

`exact_pairs` finds every pair of documents whose word n-gram Jaccard is >= t, exactly: a
prefix-filtered all-pairs join (two sets with Jaccard >= t share an element among the first
|x| - ceil(t|x|) + 1 elements of each, in one global order), then the true Jaccard of each candidate.
`minhash_merges` runs the same LSH banding, verification and union-find as `dedup_fuzzy`, in memory;
`step_drops` runs the real step (`run_dedup_step`, on zephyr) on the same texts, so the two can be
compared and the step's own recall measured.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from itertools import combinations

from marin.curation.dedup import components, group_edges, recall_first_params
from marin.curation.minhash import MinHasher, band_keys, estimated_jaccard, jaccard, shingles


def exact_pairs(sets: list[set], t: float) -> dict[tuple[int, int], float]:
    """{(i, j): Jaccard} for every i < j with Jaccard(sets[i], sets[j]) >= t."""
    freq = Counter(g for s in sets for g in s)
    index: dict[str, list[int]] = defaultdict(list)
    candidates: set[tuple[int, int]] = set()
    for i, s in enumerate(sets):
        ordered = sorted(s, key=lambda g: (freq[g], g))
        prefix = ordered[: len(ordered) - math.ceil(t * len(ordered)) + 1] if ordered else []
        for g in prefix:
            for j in index[g]:
                candidates.add((j, i))
            index[g].append(i)
    found = {}
    for i, j in candidates:
        sim = jaccard(sets[i], sets[j])
        if sim >= t:
            found[(i, j)] = sim
    return found


def brute_force_pairs(sets: list[set], t: float) -> dict[tuple[int, int], float]:
    """The same as `exact_pairs` by comparing every pair (quadratic: small inputs only)."""
    return {
        (i, j): sim for i, j in combinations(range(len(sets)), 2) if (sim := jaccard(sets[i], sets[j])) >= t
    }


def minhash_merges(
    texts: list[str],
    threshold: float = 0.8,
    num_perm: int = 128,
    ngram: int = 5,
    bands: int | None = None,
    seed: int = 1,
) -> tuple[set[tuple[int, int]], dict[int, int]]:
    """(verified merged pairs, {dropped document: its component's earliest}) as dedup_fuzzy computes them."""
    hasher = MinHasher(num_perm, ngram, seed)
    b, r = (bands, num_perm // bands) if bands else recall_first_params(threshold, num_perm)
    sigs = [hasher.signature(t) for t in texts]
    buckets: dict[tuple[int, int], list] = defaultdict(list)
    for i, sig in enumerate(sigs):
        for k, key in enumerate(band_keys(sig, b, r)):
            buckets[(k, key)].append((k, key, i))
    edges = {e for key, recs in buckets.items() if len(recs) > 1 for e in group_edges(key, recs)}
    merged = {(a, c) for a, c in edges if estimated_jaccard(sigs[a], sigs[c]) >= threshold}
    return merged, components(merged)


def step_drops(
    texts: list[str], work: str, threshold: float = 0.8, num_perm: int = 128, ngram: int = 5, zephyr=None
) -> tuple[dict[int, int], dict]:
    """({dropped document: the document kept for it}, stats.json) of the real `dedup_fuzzy` step body
    on `texts`, written as one JSONL file in the local folder `work` (each drop is read back from
    `_rejected/`)."""
    import json
    from pathlib import Path

    from marin.curation.dedup import DedupConfig, run_dedup_step
    from zephyr import ZephyrConfig
    from zephyr.io import Position, ShardStats, read_file

    source = str(Path(work, "texts.jsonl"))
    with open(source, "w") as f:
        f.writelines(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(texts))
    out = Path(work, "deduped")
    config = DedupConfig(
        "fuzzy",
        (source,),
        threshold=threshold,
        num_perm=num_perm,
        ngram=ngram,
        rejected=True,
        zephyr=zephyr or ZephyrConfig.from_env().with_overrides(quiet=True),
    )
    run_dedup_step(config, str(out))
    drops: dict[int, int] = {}
    for part in sorted(out.glob("_rejected/part-*.jsonl.zst")):
        for record in read_file(str(part), "jsonl", "fail", Position(), ShardStats()):
            drops[record["id"]] = int(record["duplicate_of"].rsplit(":", 1)[1]) - 1  # record N is text N-1
    return drops, json.loads((out / "stats.json").read_text())


def lsh_quality(
    texts: list[str],
    threshold: float = 0.8,
    num_perm: int = 128,
    ngram: int = 5,
    recall_at: float = 0.9,
    bands: int | None = None,
    step_work: str | None = None,
) -> dict:
    """Recall on pairs with true Jaccard >= `recall_at` (both ends in one component) and precision of the
    merged pairs (true Jaccard >= threshold). With `step_work`, the real step runs there too, adding its
    recall and whether it dropped exactly what the in-memory copy drops."""
    sets = [shingles(t, ngram) for t in texts]
    truth = exact_pairs(sets, recall_at)
    merged, drops = minhash_merges(texts, threshold, num_perm, ngram, bands)

    def recall(roots: dict[int, int]) -> float:
        found = sum(roots.get(i, i) == roots.get(j, j) for i, j in truth)
        return found / len(truth) if truth else 1.0

    correct = sum(jaccard(sets[a], sets[b]) >= threshold for a, b in merged)
    out = {
        "documents": len(texts),
        "true_pairs_at_recall_threshold": len(truth),
        "recall": recall(drops),
        "merged_pairs": len(merged),
        "precision": correct / len(merged) if merged else 1.0,
        "threshold": threshold,
        "recall_at": recall_at,
    }
    if step_work is not None and bands is None:
        real, stats = step_drops(texts, step_work, threshold, num_perm, ngram)
        out |= {
            "step_recall": recall(real),
            "step_merged_pairs": stats["merged_pairs"],
            "step_drops_equal_in_memory": real == drops,
        }
    return out
