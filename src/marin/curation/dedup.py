"""Exact and fuzzy (MinHash-LSH) deduplication on zephyr's group_by shuffle.

Both run as one zephyr pipeline, then a rewrite. (1) Each input piece emits one small record per
document key: the hash of the normalized text (exact) or one per LSH band (fuzzy; the MinHash
signatures are streamed to a per-piece file of fixed-size rows in the step's `_work/` folder).
(2) zephyr's `group_by` brings equal keys together, spilling sorted runs to disk beyond its memory
budget; each group yields edges (earliest position, other position). Fuzzy edges, which a pair of
near copies yields once per band it shares, are made distinct by zephyr's `deduplicate` and
verified in the workers that read that shuffle: each reads the two signature rows of an edge and
keeps it when their estimated Jaccard is >= threshold. Only the verified edges come back to the
driver, which joins them into connected components (union-find: memory in the number of
duplicates, not of documents). (3) Each piece is rewritten without the documents that are not their
component's earliest (in canonical input order), each piece's task getting only its own drops; so
the output does not depend on shard counts, piece sizes or the backend.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from marin.curation.documents import (
    PIECE_BYTES,
    CurationStats,
    InputShard,
    read_records,
    rejected_writer,
    report_bad,
    resolve_inputs,
    write_output,
)
from marin.curation.minhash import MinHasher, band_keys, estimated_jaccard, lsh_params
from marin.curation.steps import finish, run_shards, zephyr_config
from marin.execution.keyed import NOT_KEY
from storage import join, open_file, open_write, remove, remove_empty_dir
from zephyr import Dataset, ShardInfo

if TYPE_CHECKING:
    from zephyr import ZephyrConfig

SHARD_BITS = 32
LINE_MASK = (1 << SHARD_BITS) - 1
CANDIDATES = -1  # first field of the one record per verifying shard that counts its candidate pairs
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
    piece_bytes: int = field(default=PIECE_BYTES, metadata=NOT_KEY)  # see DocumentStepConfig
    rejected: bool = False  # also write each dropped document, with its reason, under _rejected/
    allow_empty: bool = field(default=False, metadata=NOT_KEY)  # inputs that yield no document succeed

    def input_names(self) -> tuple[str, ...]:
        return self.inputs

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
        if self.rejected:
            out["rejected"] = True
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


def signature_path(work: str, index: int) -> str:
    return join(work, f"signatures-{index:05d}.bin")


# A signature file: the record number of its first row (int64), then one uint32 row of num_perm
# minima per record number from there on (rows of records without text are zeros and never read).
_HEADER = np.dtype("<i8")


def fuzzy_keys(config: DedupConfig, work: str, tasks, info: ShardInfo) -> Iterator[tuple]:
    hasher = MinHasher(config.num_perm, config.ngram, config.seed)
    bands, rows = config.band_rows()
    blank = bytes(4 * config.num_perm)
    for index, _count, shard in tasks:
        stats = CurationStats()
        with open_write(signature_path(work, index)) as out:
            first = next_line = None
            for _where, line, record in read_records(shard, config.bad_records, stats.bad):
                text = _text(config, record)
                if not isinstance(text, str):
                    continue
                if first is None:
                    first = next_line = line
                    out.write(np.array(first, _HEADER).tobytes())
                out.write(blank * (line - next_line))  # records skipped since the last row
                sig = hasher.signature(text)
                out.write(sig.astype("<u4").tobytes())
                next_line = line + 1
                pos = position(index, line)
                for key in band_keys(sig, bands, rows):
                    # band keys are xxh64 seeded with the band index, so one int names (band, rows);
                    # a chance collision across bands only adds a candidate, which verification checks
                    yield (key, pos)
            if first is None:
                out.write(np.array(0, _HEADER).tobytes())


# -- pass 2: edges -----------------------------------------------------------------------------------
def group_edges(key, records) -> tuple[tuple[int, int], ...]:
    """Edges from the earliest document of a group to every other one."""
    positions = sorted({r[-1] for r in records})
    return tuple((positions[0], p) for p in positions[1:])


def _first(r):
    return r[0]


def _each(group):
    return group


class SignatureReader:
    """Reads single signature rows from pass 1's files, by document position (a seek and a read each)."""

    def __init__(self, work: str, num_perm: int, max_open: int = 16):
        self.work, self.row_bytes, self.max_open = work, 4 * num_perm, max_open
        self.files: dict[int, tuple[Any, int]] = {}

    def get(self, pos: int) -> np.ndarray:
        shard, line = pos >> SHARD_BITS, pos & LINE_MASK
        if shard not in self.files:
            if len(self.files) >= self.max_open:
                oldest = next(iter(self.files))
                self.files.pop(oldest)[0].close()
            f = open_file(signature_path(self.work, shard), "rb")
            self.files[shard] = (f, int(np.frombuffer(f.read(_HEADER.itemsize), _HEADER)[0]))
        f, first = self.files[shard]
        f.seek(_HEADER.itemsize + (line - first) * self.row_bytes)
        return np.frombuffer(f.read(self.row_bytes), "<u4")

    def close(self) -> None:
        for f, _ in self.files.values():
            f.close()
        self.files.clear()


def verify_edges(config: DedupConfig, work: str, edges, info: ShardInfo) -> Iterator[tuple[int, int]]:
    """The candidate edges whose signatures agree on >= threshold of their minima, then one
    (CANDIDATES, n) record with how many candidates this shard checked."""
    sigs = SignatureReader(work, config.num_perm)
    candidates = 0
    try:
        for a, b in edges:
            candidates += 1
            if estimated_jaccard(sigs.get(a), sigs.get(b)) >= config.threshold:
                yield (a, b)
    finally:
        sigs.close()
    yield (CANDIDATES, candidates)


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


def drops_by_shard(drops: dict[int, int], shards: list[InputShard]) -> list[dict[int, str]]:
    """Per shard: its dropped documents' record numbers -> the `file:record` of the document kept."""
    out: list[dict[int, str]] = [{} for _ in shards]
    for pos, keeper in drops.items():
        out[pos >> SHARD_BITS][pos & LINE_MASK] = f"{shards[keeper >> SHARD_BITS].path}:{keeper & LINE_MASK}"
    return out


# -- pass 3: rewrite ---------------------------------------------------------------------------------
def rewrite_shard(
    config: DedupConfig, output_path: str, index: int, count: int, shard: InputShard, drops: dict[int, str]
) -> CurationStats:
    stats = CurationStats()
    reason = f"dedup_{config.method}.duplicate"

    def kept(reject):
        for where, line, record in read_records(shard, config.bad_records, stats.bad):
            text = _text(config, record)
            if not isinstance(text, str):
                report_bad(config.bad_records, stats.bad, where, line, f"no string field {config.key!r}")
                continue
            stats.read(text)
            keeper = drops.get(line)
            if keeper is not None:
                stats.dropped(reason, where, line, record, text, duplicate_of=keeper)
                reject(record, reason, where, line, duplicate_of=keeper)
                continue
            stats.wrote(text)
            yield record

    with rejected_writer(output_path, index, count, config.rejected) as reject:
        write_output(output_path, index, count, kept(reject))
    return stats


def run_dedup_step(config: DedupConfig, output_path: str) -> dict:
    """Deduplicate the inputs (see the module docstring); writes shards, stats.json, and cleans `_work/`."""
    shards = resolve_inputs(config.inputs, config.piece_bytes)
    zconfig = zephyr_config(config.zephyr, len(shards))
    tasks = [(i, len(shards), s) for i, s in enumerate(shards)]
    work = join(output_path, "_work")
    fuzzy = config.method == "fuzzy"
    pipeline = (
        Dataset.from_list(tasks, num_shards=max(1, len(tasks)))
        .map_shard(partial(fuzzy_keys if fuzzy else exact_keys, config, work))
        .group_by(_first, group_edges, num_shards=config.num_shards)
        .flat_map(_each)
    )
    if fuzzy:
        pipeline = pipeline.deduplicate(num_shards=config.num_shards).map_shard(
            partial(verify_edges, config, work)
        )
    try:
        found = pipeline.collect(config=zconfig)
    finally:
        if fuzzy:
            for index in range(len(shards)):  # only the signature files this step wrote in pass 1
                remove(signature_path(work, index))
            remove_empty_dir(work)
    edges = [e for e in found if e[0] != CANDIDATES]
    candidates = sum(e[1] for e in found if e[0] == CANDIDATES) if fuzzy else len(edges)
    drops = components(edges)
    results = run_shards(
        partial(rewrite_shard, config, output_path), shards, config.zephyr, drops_by_shard(drops, shards)
    )
    extra = {"candidate_pairs": candidates, "merged_pairs": len(edges), "clusters": len(set(drops.values()))}
    return finish(
        f"dedup_{config.method}",
        config.describe(),
        results,
        output_path,
        extra,
        inputs=config.inputs,
        allow_empty=config.allow_empty,
    )
