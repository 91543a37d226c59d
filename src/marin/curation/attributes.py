"""`score_documents`: scores kept beside the documents as attribute shards (Dolma's layout).

The step never copies the text. For input shard i (in the canonical order, as every curation step
reads it) it writes `part-i-of-N.jsonl.zst`, one row per document of that shard, in order:

    {"id": "web-0000042", "attributes": {"quality": 0.9731}}

`id` is the document's `id_key` field (its input `file:record` when it has none). A document
whose text is missing is skipped under `bad_records="skip"`, in scoring and in every cut alike.
So attribute shard i is aligned with document shard i row by row, and a cut (`marin.curation.cut`)
joins any number of attribute sets to the documents by id, one shard beside the other, checking
each row's id. Scores are exactly what the scorer returned (a float; JSON keeps every digit).

Beside the shards, `stats.json` holds the counts and the health report (`marin.curation.health`):
per-source score summaries and histograms, the rank correlation with length and with source, and
its warnings, which the step's result repeats (`marin status` shows them). When the scorer is a
`train_quality_classifier` step, the classifier's held-out AUC is the step's headline.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any
from urllib.parse import urlparse

import msgspec
import numpy as np

from marin.curation.documents import (
    PIECE_BYTES,
    STEP_PREFIX,
    CurationError,
    CurationStats,
    InputShard,
    record_blocks,
    report_bad,
    resolve_inputs,
    write_output,
)
from marin.curation.health import ScoreColumns, score_health
from marin.curation.scorers import ScorerSpec, load_scorer
from marin.curation.steps import finish, run_shards
from marin.execution.keyed import NOT_KEY, key_fields

REPORT_FILE = "report.json"  # a classifier step's held-out report (marin.curation.classifier)


@dataclass(frozen=True)
class ScoreConfig:
    """Score every document of `inputs` with `scorer`, kept as attribute `attribute`."""

    inputs: tuple[str, ...]
    scorer: ScorerSpec
    attribute: str = "quality"
    text_key: str = "text"
    id_key: str = "id"
    # the field naming a document's source for the health checks (a URL counts as its host); by
    # default the input the document came from
    source_key: str | None = None
    bad_records: str = "fail"
    zephyr: object = field(default=None, metadata=NOT_KEY)
    piece_bytes: int = field(default=PIECE_BYTES, metadata=NOT_KEY)
    allow_empty: bool = field(default=False, metadata=NOT_KEY)
    kind: str = field(default="score_documents", init=False)

    def describe(self) -> dict:
        return key_fields(self)

    def input_names(self) -> tuple[str, ...]:
        path = getattr(self.scorer, "path", None)
        if isinstance(path, str) and not path.startswith(STEP_PREFIX):
            return self.inputs + ((path,) if path.endswith(".bin") else (path.rstrip("/") + "/*",))
        return self.inputs


def document_id(record: dict, id_key: str, where: str, line: int) -> str:
    """The id a document's attribute rows carry: its `id_key` field, else its input `file:record`."""
    value = record.get(id_key)
    return str(value) if value is not None else f"{where}:{line}"


@dataclass(frozen=True)
class DocumentBatch:
    """Some consecutive scorable documents of one shard, as columns: each one's record number
    (`lines`) in `where`, record, id and text."""

    where: str
    lines: Sequence[int]
    records: Sequence[dict]
    ids: Sequence[str]
    texts: Sequence[str]


def document_batches(
    shard: InputShard, text_key: str, id_key: str, bad_records: str, stats: CurationStats
) -> Iterator[DocumentBatch]:
    """The scorable documents of a shard a block at a time: what scoring and every cut read alike (a
    record without a string text is a bad record, skipped or failed by policy)."""
    for where, lines, records in record_blocks(shard, bad_records, stats.bad):
        texts = [r.get(text_key) for r in records]
        ids = [r.get(id_key) for r in records]
        if set(map(type, texts)) == {str} and None not in ids:
            yield DocumentBatch(where, lines, records, list(map(str, ids)), texts)
            continue
        documents = []
        for line, record, text in zip(lines, records, texts, strict=True):
            if isinstance(text, str):
                documents.append((line, record, document_id(record, id_key, where, line), text))
            else:
                report_bad(
                    bad_records, stats.bad, where, line, f"the record has no string field {text_key!r}"
                )
        if documents:
            yield DocumentBatch(where, *zip(*documents, strict=True))


@dataclass
class ShardScores:
    """One shard's counts and the columns its health checks need (sources as codes into `source_names`)."""

    stats: CurationStats
    scores: np.ndarray
    lengths: np.ndarray
    source_codes: np.ndarray
    source_names: list[str]


def score_shard(
    config: ScoreConfig,
    scorer: ScorerSpec,
    output_path: str,
    index: int,
    count: int,
    shard: InputShard,
    source: str,
) -> ShardScores:
    """Score one input shard and write its attribute shard, a block of documents at a time."""
    stats = CurationStats()
    model = load_scorer(scorer)
    documents = document_batches(shard, config.text_key, config.id_key, config.bad_records, stats)
    attribute = config.attribute
    scores: list[float] = []
    lengths: list[int] = []
    sources = _Sources(config.source_key, source)

    def rows() -> Iterator[dict]:
        for batch in documents:
            values = model.scores(batch.texts)
            stats.read_all(batch.texts)
            scores.extend(values)
            lengths.extend(map(len, batch.texts))
            sources.add(batch.records)
            yield from (
                {"id": i, "attributes": {attribute: v}} for i, v in zip(batch.ids, values, strict=True)
            )

    write_output(output_path, index, count, rows())
    stats.documents_out = len(scores)
    return ShardScores(
        stats,
        np.asarray(scores, np.float64),
        np.asarray(lengths, np.int64),
        sources.codes(len(scores)),
        sources.names,
    )


class _Sources:
    """Each document's source as a code into `names`: the `source_key` field (a URL counts as its
    host), or, without one, the input the shard came from."""

    def __init__(self, source_key: str | None, default: str) -> None:
        self.key = source_key
        self.names: list[str] = [] if source_key else [default]
        self._codes: list[int] = []
        self._of_value: dict[str, int] = {}  # a field's value -> its source's code
        self._of_name: dict[str, int] = {}

    def add(self, records: Sequence[dict]) -> None:
        if self.key is not None:
            self._codes += [self._code(str(r.get(self.key))) for r in records]

    def codes(self, count: int) -> np.ndarray:
        return np.asarray(self._codes, np.int64) if self.key else np.zeros(count, np.int64)

    def _code(self, value: str) -> int:
        code = self._of_value.get(value)
        if code is None:
            name = (urlparse(value).hostname or value) if "://" in value else value
            code = self._of_name.setdefault(name, len(self.names))
            if code == len(self.names):
                self.names.append(name)
            self._of_value[value] = code
        return code


def run_score_step(config: ScoreConfig, output_path: str) -> dict:
    """Score every input shard on zephyr, write the attribute shards, stats.json and the health report."""
    shards: list[InputShard] = []
    sources: list[str] = []
    for spec in config.inputs:
        found = resolve_inputs((spec,), config.piece_bytes)
        shards += found
        sources += [spec[len(STEP_PREFIX) :] if spec.startswith(STEP_PREFIX) else spec] * len(found)
    scorer = config.scorer.resolved()
    results = run_shards(
        partial(score_shard, config, scorer, output_path), shards, config.zephyr, per_shard=sources
    )
    columns = _columns(results)
    health = score_health(columns, config.attribute)
    classifier = _classifier_report(config.scorer)
    extra = {"attribute": config.attribute, "health": health}
    if classifier is not None:
        extra["classifier"] = classifier
    summary = finish(
        config.kind,
        config.describe(),
        [r.stats for r in results],
        output_path,
        extra,
        inputs=config.inputs,
        allow_empty=config.allow_empty,
    )
    summary["warnings"] = health["warnings"]
    auc = (classifier or {}).get("heldout_auc")
    if auc and auc.get("value") is not None:
        summary["headline"] = {"metric": "classifier heldout_auc"} | {
            k: auc[k] for k in ("value", "ci95", "n")
        }
    return summary


def _columns(results: list[ShardScores]) -> ScoreColumns:
    """The shards' columns end to end, their source codes renumbered into one sorted list of the
    sources that have documents."""
    names = sorted({r.source_names[c] for r in results for c in np.unique(r.source_codes)})
    number = {name: k for k, name in enumerate(names)}
    codes = [
        np.asarray([number.get(n, -1) for n in r.source_names], np.int64)[r.source_codes] for r in results
    ]
    return ScoreColumns(
        np.concatenate([r.scores for r in results]) if results else np.zeros(0),
        np.concatenate([r.lengths for r in results]) if results else np.zeros(0, np.int64),
        np.concatenate(codes) if results else np.zeros(0, np.int64),
        names,
    )


def _classifier_report(spec: ScorerSpec) -> dict | None:
    """The held-out report of the classifier step the scorer reads, if it is one."""
    path = getattr(spec, "path", "")
    if not path.startswith(STEP_PREFIX):
        return None
    import orjson

    import storage
    from marin.execution.context import current

    data = storage.read_bytes(storage.join(current().path_of(path[len(STEP_PREFIX) :]), REPORT_FILE))
    if data is None:
        return None
    report = orjson.loads(data)
    return {k: report[k] for k in ("heldout_auc", "heldout_accuracy") if k in report}


def attribute_files(spec: str) -> list[str]:
    """The attribute shards of a score step (`step:NAME`) or under a folder, in shard order."""
    if spec.startswith(STEP_PREFIX):
        from marin.data.step_inputs import step_output_files

        files = step_output_files(spec[len(STEP_PREFIX) :])
    else:
        from storage import list_files

        files = list_files([spec.rstrip("/") + "/part-*.jsonl.zst"])
    return sorted(f for f in files if f.rsplit("/", 1)[-1].startswith("part-"))


@lru_cache(maxsize=16)
def _attribute_rows(attribute: str) -> msgspec.json.Decoder:
    """A decoder of attribute rows that keeps only each row's id and `attribute`: no dict per row, and
    rows the garbage collector does not track (a shard holds many small objects and no cycle)."""
    value = msgspec.defstruct("AttributeValue", [("value", Any, None)], rename={"value": attribute}, gc=False)
    row = msgspec.defstruct("AttributeRow", [("id", Any, None), ("attributes", value | None, None)], gc=False)
    return msgspec.json.Decoder(row)


_NUMBER_TYPES = frozenset((float, int))


def attribute_column(path: str, attribute: str) -> tuple[list, np.ndarray]:
    """The ids and `attribute` values of one attribute shard, in row order.

    The shard is decoded in one call into rows that hold only the id and that attribute; a row that
    is not such an object, or whose `attribute` is not a number, is read again the slow way so that
    the error names its file and row exactly."""
    from storage import open_read

    with open_read(path) as stream:
        data = stream.read()
    try:
        rows = _attribute_rows(attribute).decode_lines(data)
    except msgspec.DecodeError:
        return _attribute_column_checked(data, path, attribute)
    attributes = [r.attributes for r in rows]
    values = [a.value for a in attributes] if None not in attributes else []
    if len(values) != len(rows) or not set(map(type, values)) <= _NUMBER_TYPES:
        return _attribute_column_checked(data, path, attribute)
    return [r.id for r in rows], np.array(values, dtype=np.float64)


def _attribute_column_checked(data: bytes, path: str, attribute: str) -> tuple[list, np.ndarray]:
    import orjson

    ids, values = [], []
    for k, line in enumerate(filter(None, map(bytes.strip, data.split(b"\n")))):
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            raise CurationError(f"{path}:{k + 1}: an attribute row is not JSON ({e})") from None
        attributes = row.get("attributes") if isinstance(row, dict) else None
        value = attributes.get(attribute) if isinstance(attributes, dict) else None
        if not isinstance(value, int | float):
            found = row.get("id") if isinstance(row, dict) else None
            raise CurationError(f"{path}:{k + 1}: the row of id {found!r} has no number {attribute!r}")
        ids.append(row.get("id"))
        values.append(float(value))
    return ids, np.array(values, dtype=np.float64)


def first_attribute(files: Sequence[str]) -> str | None:
    """The name of the first attribute in the first row of some attribute shards (None when empty)."""
    from zephyr.io import Position, ShardStats, infer_format, read_file

    for path in files:
        for row in read_file(path, infer_format(path), "fail", Position(), ShardStats()):
            return next(iter(row.get("attributes") or {}), None)
    return None
