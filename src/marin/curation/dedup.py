"""Exact and fuzzy (MinHash-LSH) deduplication on zephyr's group_by shuffle.

Both run in three passes. (1) Each input shard emits one small record per document key: the hash of
the normalized text (exact) or one per LSH band (fuzzy; the MinHash signatures go to a per-shard
.npy file in the step's `_work/` folder). (2) zephyr's `group_by` brings equal keys together,
spilling sorted runs to disk beyond its memory budget; each group yields edges (earliest position,
other position). Fuzzy edges are verified against the full signatures (estimated Jaccard >=
threshold), then joined into connected components with union-find. (3) Each shard is rewritten
without the documents that are not their component's earliest (in canonical input order), so the
output does not depend on shard counts or the backend.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from marin.curation.documents import CurationStats, InputShard, read_records, report_bad, resolve_inputs
from marin.curation.minhash import MinHasher, band_keys, estimated_jaccard, lsh_params
from marin.curation.steps import finish, run_shards, zephyr_config
from marin.execution.keyed import NOT_KEY
from storage import atomic_write, join, open_file, remove, remove_empty_dir
from zephyr import Dataset, ShardInfo, ZephyrConfig

if TYPE_CHECKING:
    from zephyr import ZephyrConfig

SHARD_BITS = 32
_PUNCT = re.compile(r"[^\w\s]+")
_SPACE = re.compile(r"\s+")


def normalize(text: str) -> str:
    """NFKC, lower case, punctuation removed, whitespace collapsed: what exact dedup compares."""
    text = unicodedata.normalize("NFKC", text).lower()
    return _SPACE.sub(" ", _PUNCT.sub("", text)).strip()


def position(shard: int, record: int) -> int:
    """A document's place in canonical order as one int: shard, then record number."""
    return (shard << SHARD_BITS) | record


@dataclass(frozen=True)
class DedupConfig:
    """A dedup step: exact (`method="exact"`, on `key`) or fuzzy (MinHash-LSH at `threshold`)."""

    method: str
    inputs: tuple[str, ...]
    key: str = "text"
    threshold: float = 0.8
    num_perm: int = 128
    ngram: int = 5
    bands: int | None = None
    seed: int = 1
    bad_records: str = "fail"
    num_shards: int | None = field(default=None, metadata=NOT_KEY)  # shuffle width: never changes the output
    zephyr: ZephyrConfig | None = field(default=None, metadata=NOT_KEY)

    def band_rows(self) -> tuple[int, int]:
        if self.bands is not None:
            return self.bands, self.num_perm // self.bands
        return recall_first_params(self.threshold, self.num_perm)

    def describe(self) -> dict:
        """The key: the method's parameters, fuzzy dedup's computed bands and rows and its hash functions."""
        out = {
            "kind": f"dedup_{self.method}",
            "inputs": list(self.inputs),
            "key": self.key,
            "bad_records": self.bad_records,
        }
        if self.method == "fuzzy":
            bands, rows = self.band_rows()
            out |= {
                "threshold": self.threshold,
                "num_perm": self.num_perm,
                "ngram": self.ngram,
                "bands": bands,
                "rows": rows,
                "seed": self.seed,
                "hash": "xxh32-shingle/xxh64-band",
            }
        return out


def recall_first_params(threshold: float, num_perm: int) -> tuple[int, int]:
    """Bands that catch nearly every clear near duplicate; verification restores precision.

    The most rows r (fewest candidates, so the fewest shuffle records) whose S-curve still gives
    >= 0.995 at the midpoint between the threshold and 1 (Jaccard 0.9 for a threshold of 0.8).
    """
    target = (1 + threshold) / 2
    for rows in range(num_perm, 0, -1):
        bands = num_perm // rows
        if 1 - (1 - target**rows) ** bands >= 0.995:
            return bands, rows
    return lsh_params(threshold, num_perm)


def _text(config: DedupConfig, record: dict) -> Any:
    return record.get(config.key)


# -- pass 1: keys ---------------------------------------------------------------------------------
def exact_keys(config: DedupConfig, work: str, tasks, info: ShardInfo) -> Iterator[tuple]:
    import xxhash

    for index, _count, shard in tasks:
        stats = CurationStats()
        for _where, line, record in read_records(shard, config.bad_records, stats.bad):
            text = _text(config, record)
            if isinstance(text, str):
                yield (xxhash.xxh3_128_intdigest(normalize(text).encode()), position(index, line))


def fuzzy_keys(config: DedupConfig, work: str, tasks, info: ShardInfo) -> Iterator[tuple]:
    hasher = MinHasher(config.num_perm, config.ngram, config.seed)
    bands, rows = config.band_rows()
    for index, _count, shard in tasks:
        stats = CurationStats()
        lines: list[int] = []
        sigs: list[np.ndarray] = []
        for _where, line, record in read_records(shard, config.bad_records, stats.bad):
            text = _text(config, record)
            if not isinstance(text, str):
                continue
            sig = hasher.signature(text)
            lines.append(line)
            sigs.append(sig)
            pos = position(index, line)
            for key in band_keys(sig, bands, rows):
                # band keys are xxh64 seeded with the band index, so one int names (band, rows);
                # a chance collision across bands only adds a candidate, which verification checks
                yield (key, pos)
        with atomic_write(join(work, f"signatures-{index:05d}.npz")) as f:
            matrix = np.stack(sigs) if sigs else np.zeros((0, config.num_perm), np.uint32)
            np.savez(f, lines=np.asarray(lines, dtype=np.int64), sigs=matrix)


# -- pass 2: edges -----------------------------------------------------------------------------------
def group_edges(key, records) -> tuple[tuple[int, int], ...]:
    """Edges from the earliest document of a group to every other one."""
    positions = sorted({r[-1] for r in records})
    return tuple((positions[0], p) for p in positions[1:])


def _first(r):
    return r[0]


class _Signatures:
    """Random access to the per-shard signature files of pass 1."""

    def __init__(self, work: str):
        self.work, self.cache = work, {}

    def get(self, pos: int) -> np.ndarray:
        shard, line = pos >> SHARD_BITS, pos & ((1 << SHARD_BITS) - 1)
        if shard not in self.cache:
            with open_file(join(self.work, f"signatures-{shard:05d}.npz"), "rb") as f:
                data = np.load(f)
                self.cache[shard] = (data["lines"], data["sigs"])
            if len(self.cache) > 8:
                self.cache.pop(next(iter(self.cache)))
        lines, sigs = self.cache[shard]
        return sigs[int(np.searchsorted(lines, line))]


def components(edges) -> dict[int, int]:
    """Union-find over the edges: each non-root position -> the earliest position of its component."""
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        root = x
        while parent.get(root, root) != root:
            root = parent[root]
        while parent.get(x, x) != root:
            parent[x], x = root, parent[x]
        return root

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {x: find(x) for x in parent if find(x) != x}


# -- pass 3: rewrite ---------------------------------------------------------------------------------
def rewrite_shard(
    config: DedupConfig, drops: dict[int, int], output_path: str, index: int, count: int, shard: InputShard
) -> CurationStats:
    from marin.curation.documents import write_output

    stats = CurationStats()
    reason = f"dedup_{config.method}.duplicate"

    def kept():
        for where, line, record in read_records(shard, config.bad_records, stats.bad):
            text = _text(config, record)
            if not isinstance(text, str):
                report_bad(config.bad_records, stats.bad, where, line, f"no string field {config.key!r}")
                continue
            stats.read(text)
            keeper = drops.get(position(index, line))
            if keeper is not None:
                stats.dropped(
                    reason,
                    where,
                    line,
                    record,
                    text,
                    duplicate_of=f"shard {keeper >> SHARD_BITS} record {keeper & 0xFFFFFFFF}",
                )
                continue
            stats.wrote(text)
            yield record

    write_output(output_path, index, count, kept())
    return stats


def run_dedup_step(config: DedupConfig, output_path: str) -> dict:
    """Deduplicate the inputs (see the module docstring); writes shards, stats.json, and cleans `_work/`."""
    shards = resolve_inputs(config.inputs)
    zconfig = zephyr_config(config.zephyr, len(shards))
    tasks = [(i, len(shards), s) for i, s in enumerate(shards)]
    work = join(output_path, "_work")
    emit = exact_keys if config.method == "exact" else fuzzy_keys
    groups = (
        Dataset.from_list(tasks, num_shards=max(1, len(tasks)))
        .map_shard(partial(emit, config, work))
        .group_by(_first, group_edges, num_shards=config.num_shards)
        .filter(bool)
        .collect(config=zconfig)
    )
    edges = {edge for group in groups for edge in group}
    candidates = len(edges)
    if config.method == "fuzzy":
        sigs = _Signatures(work)
        edges = {
            (a, b)
            for a, b in sorted(edges)
            if estimated_jaccard(sigs.get(a), sigs.get(b)) >= config.threshold
        }
        for index in range(len(shards)):  # only the signature files this step wrote in pass 1
            remove(join(work, f"signatures-{index:05d}.npz"))
        remove_empty_dir(work)
    drops = components(edges)
    results = run_shards(partial(rewrite_shard, config, drops, output_path), shards, config.zephyr)
    extra = {"candidate_pairs": candidates, "merged_pairs": len(edges), "clusters": len(set(drops.values()))}
    return finish(f"dedup_{config.method}", config.describe(), results, output_path, extra)
