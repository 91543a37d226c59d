"""`filter_by_score`: keep documents by their attributes, without loading any model.

The cut reads the documents and, beside each document shard, the same-numbered shard of every
attribute set it uses (`marin.curation.attributes`: aligned row by row); each row's id must equal
its document's, or the step fails naming both. A document is eligible when each `also` attribute is
at least its minimum; of the eligible documents it keeps those whose `attribute` is at least
`threshold`, or the `keep_top` share with the highest scores (round(keep_top * eligible)
documents; ties at the cut broken by document order, so the count is exact and the choice
deterministic). `keep_top` needs the scores of every document first: a first pass reads the
attribute shards only, then the documents are read once.

Drop reasons: `filter_by_score.below_top` / `filter_by_score.below_threshold`, and
`filter_by_score.also:<attribute>` for a document an `also` condition excluded.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from itertools import compress

import numpy as np

from marin.curation.attributes import (
    DocumentBatch,
    attribute_column,
    attribute_files,
    document_batches,
    first_attribute,
)
from marin.curation.documents import (
    PIECE_BYTES,
    STEP_PREFIX,
    CurationError,
    CurationStats,
    InputShard,
    rejected_writer,
    resolve_inputs,
    write_output,
)
from marin.curation.steps import finish, run_shards
from marin.execution.keyed import NOT_KEY, key_fields


@dataclass(frozen=True)
class ScoreSet:
    """One attribute set the cut reads (`scores`: `step:NAME` or a folder) and the attribute it uses
    (None: the set's first attribute); `minimum` is an `also` condition's bound."""

    scores: str
    attribute: str | None = None
    minimum: float | None = None


@dataclass(frozen=True)
class CutConfig:
    """Keep the documents of `inputs` whose `ranked` score is in the top `keep_top` share or at least
    `threshold`, among those meeting every `also` minimum."""

    inputs: tuple[str, ...]
    ranked: ScoreSet
    keep_top: float | None = None
    threshold: float | None = None
    also: tuple[ScoreSet, ...] = ()
    text_key: str = "text"
    id_key: str = "id"
    bad_records: str = "fail"
    rejected: bool = False
    zephyr: object = field(default=None, metadata=NOT_KEY)
    piece_bytes: int = field(default=PIECE_BYTES, metadata=NOT_KEY)
    allow_empty: bool = field(default=False, metadata=NOT_KEY)
    kind: str = field(default="filter_by_score", init=False)

    def describe(self) -> dict:
        return key_fields(self)

    def input_names(self) -> tuple[str, ...]:
        folders = [s.scores for s in (self.ranked, *self.also) if not s.scores.startswith(STEP_PREFIX)]
        return self.inputs + tuple(f"{f.rstrip('/')}/part-*.jsonl.zst" for f in folders)


@dataclass(frozen=True)
class Resolved:
    """A score set at run time: its attribute shards (one per document shard) and attribute name."""

    files: tuple[str, ...]
    attribute: str
    minimum: float | None


def _resolve(score_set: ScoreSet, shards: int, step: str) -> Resolved:
    files = attribute_files(score_set.scores)
    if len(files) != shards:
        raise CurationError(
            f"{step}: the scores {score_set.scores} have {len(files)} attribute shards and the documents "
            f"{shards} shards; score the same input the cut reads"
        )
    attribute = score_set.attribute or first_attribute(files)
    return Resolved(tuple(files), attribute or "", score_set.minimum)


def shard_scores(sets: tuple[Resolved, ...], index: int, count: int, shard: InputShard) -> np.ndarray:
    """Pass 1 of a `keep_top` cut: shard `index`'s ranked scores, NaN where an `also` minimum fails."""
    columns = [attribute_column(s.files[index], s.attribute)[1] for s in sets]
    ranked = columns[0]
    for s, col in zip(sets[1:], columns[1:], strict=True):
        if len(col) != len(ranked):
            raise CurationError(
                f"{s.files[index]} has {len(col)} rows and {sets[0].files[index]} {len(ranked)}"
            )
        ranked = np.where(col >= s.minimum, ranked, np.nan)
    return ranked


def fates(sets: tuple[Resolved, ...], values: list[np.ndarray], bound: tuple[float, int]) -> np.ndarray:
    """Each row's fate in the cut: 0 kept, 1 below the cut, 2 + j failed the j-th `also` minimum (the
    first it failed). A ranked score above `bound[0]` is kept, and of those exactly at it (and meeting
    every minimum) the first `bound[1]`, in row order."""
    threshold, ties = bound
    rows = min(map(len, values))
    ranked = values[0][:rows]
    fate = np.zeros(rows, np.int32)
    for j, (s, col) in enumerate(zip(sets[1:], values[1:], strict=True)):
        fate[(fate == 0) & (col[:rows] < s.minimum)] = 2 + j
    below = (fate == 0) & (ranked <= threshold)
    at_cut = below & (ranked == threshold)
    below &= ~(at_cut & (np.cumsum(at_cut) <= ties))
    fate[below] = 1
    return fate


def cut_shard(
    config: CutConfig,
    sets: tuple[Resolved, ...],
    output_path: str,
    index: int,
    count: int,
    shard: InputShard,
    bound: tuple[float, int],
) -> CurationStats:
    """Pass 2: keep the documents of one shard whose ranked score is above `bound[0]` (or equal to
    it, for the first `bound[1]` such documents) and that meet every `also` minimum.

    The attribute shards are read whole first (ids and values), each row's fate is worked out
    with numpy, and the documents then stream past a batch at a time, their ids checked against
    the rows'."""
    stats = CurationStats()
    columns = [attribute_column(s.files[index], s.attribute) for s in sets]
    fate = fates(sets, [values for _, values in columns], bound)
    below = "filter_by_score.below_top" if config.keep_top is not None else "filter_by_score.below_threshold"
    reasons = [None, below, *(f"filter_by_score.also:{s.attribute}" for s in sets[1:])]

    def kept(reject) -> Iterator[dict]:
        start = 0
        for batch in document_batches(shard, config.text_key, config.id_key, config.bad_records, stats):
            records, texts = batch.records, batch.texts
            for s, (row_ids, _) in zip(sets, columns, strict=True):
                _check_ids(s, row_ids, start, batch)
            here = fate[start : start + len(texts)]
            start += len(texts)
            stats.read_all(texts)
            keep = (here == 0).tolist()
            if all(keep):
                stats.wrote_all(texts)
                yield from records
                continue
            where, lines = batch.where, batch.lines
            for code in np.flatnonzero(np.bincount(here)[1:]) + 1:
                dropped = np.flatnonzero(here == code).tolist()
                what = ((where, lines[j], records[j], texts[j]) for j in dropped)
                stats.dropped_many(reasons[code], len(dropped), what)
            if config.rejected:
                for j in np.flatnonzero(here).tolist():
                    reject(records[j], reasons[here[j]], where, lines[j])
            stats.wrote_all(list(compress(texts, keep)))
            yield from compress(records, keep)
        for s, (row_ids, _) in zip(sets, columns, strict=True):
            if len(row_ids) > start:
                raise CurationError(f"{s.files[index]} has more rows than {shard.describe()} has documents")

    with rejected_writer(output_path, index, count, config.rejected) as reject:
        write_output(output_path, index, count, kept(reject))
    return stats


def _check_ids(s: Resolved, row_ids: list, start: int, batch: DocumentBatch) -> None:
    """Fail naming the first document of a batch whose id is not its attribute row's."""
    ids = batch.ids
    if row_ids[start : start + len(ids)] == list(ids):
        return
    for j, doc_id in enumerate(ids):
        k = start + j
        if k >= len(row_ids) or row_ids[k] != doc_id:
            found = "no row" if k >= len(row_ids) else f"the row of id {row_ids[k]!r}"
            raise CurationError(
                f"the scores do not match the documents: {batch.where}:{batch.lines[j]} is id {doc_id!r}, "
                f"and {s.files} has {found} in its place; score the same input the cut reads"
            )


def top_bounds(per_shard: list[np.ndarray], keep_top: float) -> list[tuple[float, int]]:
    """For each shard, (the cut's score, how many documents at exactly that score it keeps)."""
    eligible = np.concatenate(per_shard) if per_shard else np.zeros(0)
    valid = eligible[~np.isnan(eligible)]
    keep = round(keep_top * len(valid))
    if keep == 0:
        return [(math.inf, 0)] * len(per_shard)
    cut = float(np.sort(valid)[::-1][keep - 1])
    ties = keep - int((valid > cut).sum())  # documents at exactly `cut`, kept in document order
    bounds = []
    for scores in per_shard:
        here = min(ties, int((scores == cut).sum()))
        bounds.append((cut, here))
        ties -= here
    return bounds


def run_filter_by_score(config: CutConfig, output_path: str) -> dict:
    """Cut the documents by their scores (see the module docstring)."""
    shards = resolve_inputs(config.inputs, config.piece_bytes)
    step = f"filter_by_score ({', '.join(config.inputs)})"
    sets = tuple(_resolve(s, len(shards), step) for s in (config.ranked, *config.also))
    if config.keep_top is not None:
        per_shard = run_shards(partial(shard_scores, sets), shards, config.zephyr)
        bounds = top_bounds(per_shard, config.keep_top)
    else:
        # a document exactly at the threshold is kept: ">= threshold" is "> threshold or a tie"
        bounds = [(float(np.nextafter(config.threshold, -math.inf)), 0)] * len(shards)
    results = run_shards(
        partial(cut_shard, config, sets, output_path), shards, config.zephyr, per_shard=bounds
    )
    extra = {"ranked_attribute": sets[0].attribute}
    if config.keep_top is not None and bounds:
        extra["cut_score"] = bounds[0][0]
    return finish(
        config.kind,
        config.describe(),
        results,
        output_path,
        extra,
        inputs=config.inputs,
        allow_empty=config.allow_empty,
    )
