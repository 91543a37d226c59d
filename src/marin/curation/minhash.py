"""MinHash signatures and LSH bands over word n-gram shingles (numpy, deterministic across processes).

A document's shingles are its lower-cased word n-grams, hashed from xxh32 word hashes (fixed, so
every process and machine computes the same values); each permutation is a seeded multiply-shift
hash of the shingle hashes, and the signature keeps each minimum.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cached_property

import numpy as np

MAX_HASH = np.uint64((1 << 32) - 1)
_TOKEN = re.compile(r"\w+")


def shingles(text: str, n: int) -> set[str]:
    """The distinct lower-cased word n-grams of a text (the whole text when shorter than n words)."""
    words = _TOKEN.findall(text.lower())
    if len(words) < n:
        return {" ".join(words)} if words else set()
    return {" ".join(words[i : i + n]) for i in range(len(words) - n + 1)}


def jaccard(a: set, b: set) -> float:
    """|a ∩ b| / |a ∪ b| (1.0 for two empty sets)."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def lsh_params(threshold: float, num_perm: int) -> tuple[int, int]:
    """(bands, rows) with bands * rows <= num_perm minimising false positives + false negatives around `threshold`.

    The same integral datasketch uses: the area under the S-curve below the threshold plus the area
    above it that the curve misses, each integrated numerically.
    """

    def area(f, lo, hi, steps=200):
        step = (hi - lo) / steps
        return sum(f(lo + (i + 0.5) * step) for i in range(steps)) * step

    best, best_err = (1, num_perm), math.inf
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            fp = area(lambda s, r=r, b=b: 1 - (1 - s**r) ** b, 0.0, threshold)
            fn = area(lambda s, r=r, b=b: (1 - s**r) ** b, threshold, 1.0)
            if fp + fn < best_err:
                best, best_err = (b, r), fp + fn
    return best


@dataclass(frozen=True)
class MinHasher:
    """Signatures of `num_perm` permutations over word `ngram` shingles; `seed` fixes the permutations.

    Words are hashed with xxh32; a shingle's 64-bit hash combines its words' hashes with fixed odd
    multipliers (so repeated shingles need no set); permutation i is multiply-shift hashing,
    `(a_i * h + b_i) >> 32` in 64-bit arithmetic, with odd a_i.
    """

    num_perm: int = 128
    ngram: int = 5
    seed: int = 1

    @cached_property
    def _params(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rng = np.random.default_rng(self.seed)
        a = rng.integers(0, 2**63, size=self.num_perm, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        b = rng.integers(0, 2**63, size=self.num_perm, dtype=np.uint64)
        mult = rng.integers(0, 2**63, size=self.ngram, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        return a, b, mult

    def signature(self, text: str) -> np.ndarray:
        """The uint32 signature of a text (all MAX_HASH for a text without words)."""
        from xxhash import xxh32_intdigest

        words = _TOKEN.findall(text.lower())
        if not words:
            return np.full(self.num_perm, MAX_HASH, dtype=np.uint32)
        a, b, mult = self._params
        w = np.fromiter((xxh32_intdigest(x.encode()) for x in words), dtype=np.uint64, count=len(words))
        n = min(self.ngram, len(words))
        count = len(words) - n + 1
        grams = np.zeros(count, dtype=np.uint64)
        for k in range(n):
            grams += w[k : k + count] * mult[k]
        perm = (grams[:, None] * a + b) >> np.uint64(32)
        return perm.min(axis=0).astype(np.uint32)


def band_keys(signature: np.ndarray, bands: int, rows: int) -> list[int]:
    """One 64-bit key per band: xxh64 of the band's rows, seeded with the band index."""
    import xxhash

    return [
        xxhash.xxh64_intdigest(signature[i * rows : (i + 1) * rows].tobytes(), seed=i) for i in range(bands)
    ]


def estimated_jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """The share of equal minima: an unbiased estimate of the shingle sets' Jaccard similarity."""
    return float(np.mean(a == b))
