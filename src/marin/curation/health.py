"""What a researcher checks about a quality score before training on what it keeps.

- `auc`: the area under the ROC curve of scores for positives against negatives, with DeLong's
  variance (DeLong, DeLong & Clarke-Pearson 1988) for its 95% interval (clipped to [0, 1]); when
  the classes are perfectly separated that variance is 0, and the interval is instead the Wilson
  interval of min(positives, negatives) trials all won (a conservative bound, never [1, 1]);
- `accuracy`: the share classified right at a threshold, with its Wilson interval (scipy's);
- `histogram`: counts over fixed bins of [0, 1] (scores outside are clipped into the end bins);
- `score_health`: per source, the spread of the scores (a source whose scores are near-constant
  tells the classifier nothing about its documents: upstream Marin found 12 of 98 sources so); the
  Spearman correlation of the score with document length; and how much of the scores' ranks the
  source explains (Kruskal-Wallis H as epsilon squared, H / (n - 1): 0 when every source ranks
  alike, 1 when the sources never interleave). A classifier that mostly learned the source or the
  length sorts documents by where they come from or how long they are, not by their quality.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

Z95 = 1.959963984540054
HISTOGRAM_BINS = 20
# The warnings' thresholds (docs/curation.md, "Health checks").
NEAR_CONSTANT_STD = 0.01  # a source's scores with a standard deviation below this are near-constant
MIN_SOURCE_DOCUMENTS = 20  # sources with fewer documents are reported, never warned about
SOURCE_EPSILON_SQUARED = 0.5  # the source explains at least half of the scores' rank variance
LENGTH_SPEARMAN = 0.5  # |rank correlation| of score and length at or above this


def auc(positives: Sequence[float], negatives: Sequence[float]) -> dict:
    """AUC of `positives` against `negatives` (ties count half) with DeLong's 95% interval."""
    pos, neg = np.asarray(positives, float), np.asarray(negatives, float)
    m, n = len(pos), len(neg)
    if not m or not n:
        return {"value": None, "stderr": None, "ci95": None, "n": m + n, "positives": m, "negatives": n}
    # placements: for each positive the share of negatives below it, and for each negative the
    # share of positives above it (midranks make ties count half)
    both = midranks(np.concatenate([pos, neg]))
    rank_pos, rank_neg = midranks(pos), midranks(neg)
    v10 = (both[:m] - rank_pos) / n
    v01 = 1.0 - (both[m:] - rank_neg) / m
    value = float(v10.mean())
    var = (v10.var(ddof=1) / m if m > 1 else 0.0) + (v01.var(ddof=1) / n if n > 1 else 0.0)
    se = float(np.sqrt(var))
    ci = (max(0.0, value - Z95 * se), min(1.0, value + Z95 * se))
    if se == 0:  # perfectly separated (or all tied): DeLong's variance is 0, which claims certainty
        k = min(m, n)
        ci = tuple(accuracy(round(value * k), k)["ci95"])
    return {"value": value, "stderr": se, "ci95": list(ci), "n": m + n, "positives": m, "negatives": n}


def midranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n with ties given their mean rank (scipy's `rankdata`, without importing scipy.stats,
    which costs seconds in every scoring worker)."""
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    return (ends - (counts - 1) / 2.0)[inverse]


def accuracy(correct: int, n: int) -> dict:
    """The share `correct / n` with its Wilson 95% interval."""
    if not n:
        return {"value": None, "ci95": None, "n": 0}
    from scipy.stats import binomtest

    ci = binomtest(correct, n).proportion_ci(0.95, method="wilson")
    return {"value": correct / n, "ci95": [float(ci.low), float(ci.high)], "n": n}


def histogram(scores: np.ndarray, bins: int = HISTOGRAM_BINS) -> list[int]:
    """Counts of `scores` in `bins` equal bins of [0, 1]."""
    index = np.clip((np.asarray(scores, float) * bins).astype(int), 0, bins - 1)
    return np.bincount(index, minlength=bins).tolist()


def summary(scores: np.ndarray) -> dict:
    """Count, mean, standard deviation and deciles of some scores, and their histogram."""
    if not len(scores):
        return {"documents": 0}
    q = np.quantile(scores, [0.1, 0.5, 0.9])
    return {
        "documents": int(len(scores)),
        "mean": float(scores.mean()),
        "std": float(scores.std()),
        "p10": float(q[0]),
        "p50": float(q[1]),
        "p90": float(q[2]),
        "histogram": histogram(scores),
    }


@dataclass(frozen=True)
class ScoreColumns:
    """Every scored document's score, length (characters) and source, in document order: a source
    is a code, an index into `source_names`."""

    scores: np.ndarray
    lengths: np.ndarray
    source_codes: np.ndarray
    source_names: list[str]


def score_health(columns: ScoreColumns, attribute: str) -> dict:
    """The health report of one score (see the module docstring) with its warnings."""
    scores, lengths = columns.scores.astype(float), columns.lengths.astype(float)
    names, codes = columns.source_names, columns.source_codes
    order = np.argsort(codes, kind="stable")
    groups = (
        np.split(scores[order], np.cumsum(np.bincount(codes, minlength=len(names)))[:-1]) if names else []
    )
    per_source = {name: summary(group) for name, group in zip(names, groups, strict=True)}
    warnings: list[str] = []
    for name, s in per_source.items():
        if s["documents"] >= MIN_SOURCE_DOCUMENTS and s["std"] < NEAR_CONSTANT_STD:
            warnings.append(
                f"near-constant {attribute} within source {name!r}: std {s['std']:.2g} over "
                f"{s['documents']} documents; the score tells these documents apart by nothing"
            )
    report = {
        "attribute": attribute,
        "bins": HISTOGRAM_BINS,
        "all": summary(scores),
        "sources": per_source,
        "length_spearman": _spearman(scores, lengths),
        "source_epsilon_squared": _epsilon_squared(scores, codes, len(names)),
    }
    rho = report["length_spearman"]["value"]
    if rho is not None and abs(rho) >= LENGTH_SPEARMAN:
        warnings.append(
            f"the classifier learned the length: Spearman {rho:.2f} between {attribute} and document length "
            f"(n={len(scores)}); check that positives and negatives have alike lengths"
        )
    e2 = report["source_epsilon_squared"]["value"]
    if e2 is not None and e2 >= SOURCE_EPSILON_SQUARED:
        warnings.append(
            f"the classifier learned the source: the source explains {e2:.0%} of the {attribute} ranks "
            f"({len(names)} sources, n={len(scores)}); train on positives and negatives from the same sources"
        )
    report["warnings"] = warnings
    return report


def _spearman(scores: np.ndarray, lengths: np.ndarray) -> dict:
    n = len(scores)
    if n < 3 or np.ptp(scores) == 0 or np.ptp(lengths) == 0:
        return {"value": None, "ci95": None, "n": n}
    rho = float(np.corrcoef(midranks(scores), midranks(lengths))[0, 1])
    # Fisher's z with the Bonett-Wright variance for Spearman's rho
    z, se = np.arctanh(np.clip(rho, -0.999999, 0.999999)), np.sqrt((1 + rho * rho / 2) / max(1, n - 3))
    return {"value": rho, "ci95": [float(np.tanh(z - Z95 * se)), float(np.tanh(z + Z95 * se))], "n": n}


def _epsilon_squared(scores: np.ndarray, codes: np.ndarray, groups: int) -> dict:
    """Kruskal-Wallis H over the sources (ties corrected, as scipy's `kruskal`) as epsilon squared.

    Computed from midranks rather than by scipy.stats, whose import costs a scoring step seconds."""
    n = len(scores)
    if groups < 2 or n < 3:
        return {"value": None, "kruskal_h": None, "n": n, "sources": groups}
    if np.ptp(scores) == 0:
        return {"value": 0.0, "kruskal_h": 0.0, "n": n, "sources": groups}
    ranks = midranks(scores)
    sizes = np.bincount(codes, minlength=groups).astype(float)
    rank_sums = np.bincount(codes, weights=ranks, minlength=groups)
    seen = sizes > 0
    h = 12.0 / (n * (n + 1)) * float(np.sum(rank_sums[seen] ** 2 / sizes[seen])) - 3.0 * (n + 1)
    _, ties = np.unique(scores, return_counts=True)
    h /= 1.0 - float(np.sum(ties.astype(float) ** 3 - ties)) / (float(n) ** 3 - n)
    return {"value": min(1.0, h / (n - 1)), "kruskal_h": h, "n": n, "sources": groups}
