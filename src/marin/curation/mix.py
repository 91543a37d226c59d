"""`mix`: a deterministic weighted sample of several inputs.

Input i gets its share `total * w_i / sum(w)` of the documents (largest remainders make the shares
add up to `total`); within an input, the documents with the smallest seeded xxh64 of their text are
taken, so the sample is fixed by the seed and independent of shard counts and backends. An input
with fewer documents than its share contributes all it has; stats.json records the shortfall.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, ClassVar

from marin.curation.dedup import position
from marin.curation.documents import CurationStats, InputShard, read_records, resolve_inputs, write_output
from marin.curation.steps import check_not_empty, finish, run_shards
from marin.execution.keyed import NOT_KEY, key_fields

if TYPE_CHECKING:
    from zephyr import ZephyrConfig


@dataclass(frozen=True)
class MixConfig:
    """Inputs with weights, how many documents in all, the sampling seed."""

    # keyed even at their defaults: these keys were published before defaults stayed out (marin.execution.keyed)
    KEYED_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("seed", "text_key", "bad_records")

    inputs: tuple[tuple[str, float], ...]
    total_documents: int
    seed: int = 0
    text_key: str = "text"
    bad_records: str = "fail"
    zephyr: ZephyrConfig | None = field(default=None, metadata=NOT_KEY)
    allow_empty: bool = field(default=False, metadata=NOT_KEY)  # inputs that yield no document succeed
    kind: str = field(default="mix", init=False)

    def describe(self) -> dict:
        """The step's key fields, as its key and stats.json record them."""
        return key_fields(self)

    def input_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.inputs)

    def shares(self) -> list[int]:
        weight = sum(w for _, w in self.inputs)
        exact = [self.total_documents * w / weight for _, w in self.inputs]
        shares = [math.floor(x) for x in exact]
        by_remainder = sorted(range(len(exact)), key=lambda i: (-(exact[i] - shares[i]), i))
        for i in by_remainder[: self.total_documents - sum(shares)]:
            shares[i] += 1
        return shares


def _rank(seed: int, text: str) -> int:
    import xxhash

    return xxhash.xxh64_intdigest(text.encode("utf-8", "surrogatepass"), seed=seed)


def smallest(config: MixConfig, limits: dict[int, int], index: int, count: int, shard: InputShard) -> list:
    """The `limits[index]` documents of a shard with the smallest rank: [(rank, position)]."""
    stats = CurationStats()
    keep = limits[index]
    ranked = (
        (_rank(config.seed, r[config.text_key]), position(index, line))
        for _w, line, r in read_records(shard, config.bad_records, stats.bad)
        if isinstance(r.get(config.text_key), str)
    )
    return heapq.nsmallest(keep, ranked)


def keep_selected(
    config: MixConfig, selected: frozenset, output_path: str, index: int, count: int, shard: InputShard
) -> CurationStats:
    stats = CurationStats()

    def kept():
        for _where, line, record in read_records(shard, config.bad_records, stats.bad):
            text = record.get(config.text_key)
            if not isinstance(text, str):
                continue
            stats.read(text)
            if position(index, line) in selected:
                stats.wrote(text)
                yield record
            else:
                stats.drops["mix.not_sampled"] += 1

    write_output(output_path, index, count, kept())
    return stats


def run_mix_step(config: MixConfig, output_path: str) -> dict:
    shards: list[InputShard] = []
    owner: list[int] = []
    for i, (spec, _w) in enumerate(config.inputs):
        found = resolve_inputs((spec,))
        shards += found
        owner += [i] * len(found)
    shares = config.shares()
    limits = {k: shares[owner[k]] for k in range(len(shards))}
    per_shard = run_shards(partial(smallest, config, limits), shards, config.zephyr)
    selected: set[int] = set()
    shortfall = {}
    for i, (spec, _w) in enumerate(config.inputs):
        candidates = [c for k, cs in enumerate(per_shard) if owner[k] == i for c in cs]
        if shares[i]:  # an input whose share rounds to 0 is asked for nothing
            check_not_empty(len(candidates), (spec,), config.allow_empty)
        chosen = heapq.nsmallest(shares[i], candidates)
        selected.update(p for _, p in chosen)
        if len(chosen) < shares[i]:
            shortfall[spec] = shares[i] - len(chosen)
    results = run_shards(
        partial(keep_selected, config, frozenset(selected), output_path), shards, config.zephyr
    )
    return finish(
        "mix",
        config.describe(),
        results,
        output_path,
        {"shares": dict(zip([s for s, _ in config.inputs], shares, strict=False)), "shortfall": shortfall},
        inputs=[s for s, _ in config.inputs],
        allow_empty=config.allow_empty,
    )
