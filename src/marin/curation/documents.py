"""Curation inputs and outputs: which shards a step reads, how records are read, written and counted.

An input is a path or glob (.jsonl/.json/.parquet, .gz/.zst; .warc/.warc.gz for extraction), the
embedded corpus `marin://web-synth` (optionally `?pages=N&seed=S&grades=G`), the embedded story corpus
`marin://tinystories-synth` (optionally `?start=A&stop=B`; records {"id", "text"}, e.g. to
decontaminate against what the evaluation reads), or `step:NAME`, a dependency
whose output files are read. Every document has a position `(shard, record)` in the canonical order
(inputs in the order given, files sorted, records in file order); dedup keeps the earliest.
An uncompressed JSONL file larger than `PIECE_BYTES` is read as several pieces (byte ranges cut
at line ends, `zephyr.io.line_spans`), so one large file still keeps several workers busy; a
compressed file or a Parquet file is one piece. Each piece becomes one output shard
`part-NNNNN-of-NNNNN.jsonl.zst`, so a step's output order is its input order, and the cuts depend
only on the files, never on the workers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import islice
from urllib.parse import parse_qs, urlparse

from marin.data.file_documents import report_bad
from marin.data.step_inputs import STEP_INPUT_PREFIX as STEP_PREFIX
from marin.execution.errors import MarinError
from zephyr.io import (
    LineSpan,
    Position,
    ShardStats,
    WriteSpec,
    infer_format,
    line_spans,
    read_blocks,
    read_file,
    write_shard,
)

WEB_SYNTH = "marin://web-synth"
WEB_SYNTH_SHARD = 1_000
STORIES = "marin://tinystories-synth"
STORIES_SHARD = 5_000
PIECE_BYTES = 32 << 20
MAX_EXAMPLES = 3
EXAMPLE_CHARS = 300


class CurationError(MarinError):
    """A curation step is declared wrongly or its input cannot be read."""


@dataclass(frozen=True)
class InputShard:
    """One unit of reading: a file (`kind` "file" or "warc"), the bytes [start, stop) of a JSONL file
    after its first `lines_before` lines (`kind` "piece"), or the web-synth pages [start, stop)."""

    kind: str
    path: str
    start: int = 0
    stop: int = 0
    seed: int = 0
    lines_before: int = 0
    grades: int = 1  # web-synth: the corpus's quality grades (marin.data.corpus.web)

    def describe(self) -> str:
        if self.kind in ("web-synth", "stories"):
            return f"{self.path}[{self.start}:{self.stop}]"
        if self.kind == "piece":
            return f"{self.path} (bytes {self.start}-{self.stop})"
        return self.path


def parse_web_synth(spec: str) -> tuple[int, int, int]:
    """(pages, seed, grades) of a `marin://web-synth?pages=N&seed=S&grades=G` name."""
    from marin.data.corpus.web import DEFAULT_PAGES

    query = parse_qs(urlparse(spec).query)
    try:
        pages, seed = int(query.get("pages", [DEFAULT_PAGES])[0]), int(query.get("seed", [0])[0])
        grades = int(query.get("grades", [1])[0])
    except ValueError:
        grades = 0
    if grades < 1:
        raise CurationError(
            f"{spec!r}: pages, seed and grades must be integers (grades >= 1), "
            f"e.g. {WEB_SYNTH}?pages=2000&seed=0&grades=4"
        )
    return pages, seed, grades


def parse_stories(spec: str) -> tuple[int, int]:
    """(start, stop) of a `marin://tinystories-synth?start=A&stop=B` name (default: the whole corpus)."""
    from marin.data.corpus import CORPUS_SIZE

    query = parse_qs(urlparse(spec).query)
    try:
        start, stop = int(query.get("start", [0])[0]), int(query.get("stop", [CORPUS_SIZE])[0])
    except ValueError:
        start = stop = -1
    if not 0 <= start <= stop:
        raise CurationError(
            f"{spec!r}: start and stop must be integers with 0 <= start <= stop, "
            f"e.g. {STORIES}?start=49950&stop=50000"
        )
    return start, stop


def check_input(spec: str, where: str) -> None:
    """Validate an input name at declaration (touches no file)."""
    if spec.startswith("marin://"):
        if spec.split("?")[0] == STORIES:
            parse_stories(spec)
            return
        if spec.split("?")[0] != WEB_SYNTH:
            raise CurationError(
                f"{where}: unknown embedded corpus {spec!r}; the embedded corpora are {WEB_SYNTH!r} "
                f"and {STORIES!r}"
            )
        parse_web_synth(spec)


def declared_files(names: Sequence[str]) -> tuple[str, ...]:
    """The files and globs among input names, as a step declares them (`StepSpec.inputs`): not the
    embedded corpora, not `step:NAME` dependencies (those enter the key through their own key)."""
    return tuple(dict.fromkeys(n for n in names if not n.startswith(("marin://", STEP_PREFIX))))


def resolve_inputs(specs: Sequence[str], piece_bytes: int = PIECE_BYTES) -> list[InputShard]:
    """The ordered shards of the inputs (run time only: lists files, reads the step context); an
    uncompressed JSONL file over `piece_bytes` is cut into pieces of about that size."""
    from storage import compression_of, list_files, size

    shards: list[InputShard] = []
    for spec in specs:
        if spec.startswith(WEB_SYNTH):
            pages, seed, grades = parse_web_synth(spec)
            shards += [
                InputShard("web-synth", spec, a, min(a + WEB_SYNTH_SHARD, pages), seed, grades=grades)
                for a in range(0, pages, WEB_SYNTH_SHARD)
            ]
            continue
        if spec.split("?")[0] == STORIES:
            start, stop = parse_stories(spec)
            shards += [
                InputShard("stories", spec, a, min(a + STORIES_SHARD, stop))
                for a in range(start, stop, STORIES_SHARD)
            ]
            continue
        if spec.startswith(STEP_PREFIX):
            from marin.data.step_inputs import step_output_files

            files = step_output_files(spec[len(STEP_PREFIX) :])
        else:
            files = list_files([spec])
        for f in files:
            kind = "warc" if ".warc" in f.rsplit("/", 1)[-1] else "file"
            if (
                kind == "file"
                and infer_format(f) == "jsonl"
                and compression_of(f) is None
                and size(f) > piece_bytes
            ):
                shards += [
                    InputShard("piece", f, s.start, s.stop, 0, s.lines_before)
                    for s in line_spans(f, piece_bytes)
                ]
                continue
            shards.append(InputShard(kind, f))
    return shards


def read_records(shard: InputShard, bad_records: str, stats: ShardStats) -> Iterator[tuple[str, int, dict]]:
    """(where, record number, record) for each record of a shard, in order."""
    if shard.kind == "web-synth":
        from marin.data.corpus.web import pages

        for i, page in enumerate(pages(shard.start, shard.stop, shard.seed, shard.grades)):
            yield shard.path, shard.start + i + 1, page
        return
    if shard.kind == "stories":
        from marin.data.corpus import stories

        for i, text in enumerate(stories(shard.start, shard.stop)):
            yield shard.path, shard.start + i + 1, {"id": shard.start + i, "text": str(text)}
        return
    if shard.kind == "warc":
        from marin.curation.extract import read_warc

        yield from read_warc(shard.path, bad_records, stats)
        return
    pos = Position()
    span = LineSpan(shard.start, shard.stop, shard.lines_before) if shard.kind == "piece" else None
    for record in read_file(shard.path, infer_format(shard.path), bad_records, pos, stats, span):
        if not isinstance(record, dict):
            report_bad(
                bad_records,
                stats,
                shard.path,
                pos.line,
                f"a record is a JSON object, got {type(record).__name__}",
            )
            continue
        yield shard.path, pos.line, record


BLOCK_RECORDS = 256  # the records a block holds when the shard's reader does not block them itself


def record_blocks(
    shard: InputShard, bad_records: str, stats: ShardStats
) -> Iterator[tuple[str, Sequence[int], list[dict]]]:
    """What `read_records` yields, a block at a time: (where, record numbers, records). A JSON or
    Parquet file comes in the blocks its reader decodes at once, with no step per record."""
    if shard.kind not in ("file", "piece"):
        records = read_records(shard, bad_records, stats)
        while block := list(islice(records, BLOCK_RECORDS)):
            _, lines, found = zip(*block, strict=True)
            yield shard.path, lines, list(found)
        return
    span = LineSpan(shard.start, shard.stop, shard.lines_before) if shard.kind == "piece" else None
    for records, lines in read_blocks(shard.path, infer_format(shard.path), bad_records, stats, span):
        if set(map(type, records)) <= {dict}:
            yield shard.path, lines, records
            continue
        objects = []
        for line, record in zip(lines, records, strict=True):
            if isinstance(record, dict):
                objects.append((line, record))
            else:
                report_bad(
                    bad_records,
                    stats,
                    shard.path,
                    line,
                    f"a record is a JSON object, got {type(record).__name__}",
                )
        if objects:
            found_lines, found = zip(*objects, strict=True)
            yield shard.path, found_lines, list(found)


def utf8_length(text: str) -> int:
    """The length of `text` in UTF-8 bytes (lone surrogates counted as encoded); an ASCII string,
    which CPython flags as such, is not encoded to count it."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


@dataclass
class CurationStats:
    """What one shard (or, merged, a whole step) read, wrote and dropped, and why."""

    documents_in: int = 0
    documents_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    drops: Counter = field(default_factory=Counter)
    examples: dict = field(default_factory=dict)
    bad: ShardStats = field(default_factory=ShardStats)

    def read(self, text: str) -> None:
        self.documents_in += 1
        self.bytes_in += utf8_length(text)

    def read_all(self, texts: Sequence[str]) -> None:
        self.documents_in += len(texts)
        self.bytes_in += sum(map(utf8_length, texts))

    def wrote(self, text: str) -> None:
        self.documents_out += 1
        self.bytes_out += utf8_length(text)

    def wrote_all(self, texts: Sequence[str]) -> None:
        self.documents_out += len(texts)
        self.bytes_out += sum(map(utf8_length, texts))

    def dropped(self, reason: str, where: str, line: int, record: dict, text: str, **extra) -> None:
        self.drops[reason] += 1
        examples = self.examples.setdefault(reason, [])
        if len(examples) < MAX_EXAMPLES:
            examples.append(_example(where, line, record, text) | extra)

    def dropped_many(self, reason: str, count: int, documents: Iterable[tuple[str, int, dict, str]]) -> None:
        """`count` documents dropped for `reason`, whose (where, line, record, text) `documents` gives
        in order: only as many are read as the examples have room for."""
        self.drops[reason] += count
        examples = self.examples.setdefault(reason, [])
        examples += [_example(*d) for d in islice(documents, max(0, MAX_EXAMPLES - len(examples)))]

    def merge(self, other: CurationStats) -> None:
        self.documents_in += other.documents_in
        self.documents_out += other.documents_out
        self.bytes_in += other.bytes_in
        self.bytes_out += other.bytes_out
        self.drops.update(other.drops)
        for reason, examples in other.examples.items():
            mine = self.examples.setdefault(reason, [])
            mine.extend(examples[: MAX_EXAMPLES - len(mine)])
        self.bad.bad_records += other.bad.bad_records
        self.bad.bad_examples.extend(other.bad.bad_examples[: 10 - len(self.bad.bad_examples)])

    def to_json(self, step: str, config: dict) -> dict:
        return {
            "step": step,
            "config": config,
            "documents_in": self.documents_in,
            "documents_out": self.documents_out,
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
            "drops": dict(sorted(self.drops.items())),
            "dropped_examples": {k: self.examples[k] for k in sorted(self.examples)},
            "bad_records": self.bad.bad_records,
            "bad_record_examples": list(self.bad.bad_examples),
        }


def _example(where: str, line: int, record: dict, text: str) -> dict:
    return {"id": record.get("id"), "where": f"{where}:{line}", "text": text[:EXAMPLE_CHARS]}


REJECTED_DIR = "_rejected"


@contextmanager
def rejected_writer(output_dir: str, index: int, count: int, enabled: bool) -> Iterator:
    """`reject(record, reason, where, line, **extra)`: with `enabled`, writes the dropped record, with
    `rejected_by` (the rule and check) and `rejected_at` (its input `file:record`) added, to
    `_rejected/part-NNNNN-of-NNNNN.jsonl.zst` (the folder downstream steps do not read)."""
    if not enabled:
        yield _no_reject
        return
    import orjson

    from storage import join, open_write

    name = output_spec(output_dir).path_for(index, count).rsplit("/", 1)[-1]
    with open_write(join(output_dir, REJECTED_DIR, name)) as out:

        def reject(record: dict, reason: str, where: str, line: int, **extra) -> None:
            row = record | {"rejected_by": reason, "rejected_at": f"{where}:{line}"} | extra
            out.write(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE))

        yield reject


def _no_reject(record: dict, reason: str, where: str, line: int, **extra) -> None:
    pass


def output_spec(output_dir: str) -> WriteSpec:
    return WriteSpec("jsonl", output_dir, "zstd")


def write_output(output_dir: str, index: int, count: int, records: Iterator[dict]) -> int:
    """Write one output shard atomically; returns how many records it holds."""
    spec = output_spec(output_dir)
    return write_shard(spec, spec.path_for(index, count), records)


def write_stats(output_dir: str, stats: dict) -> None:
    """Write `stats.json` next to the shards (atomically)."""
    import json

    from storage import join, open_write

    with open_write(join(output_dir, "stats.json")) as f:
        f.write(json.dumps(stats, indent=2, sort_keys=False).encode())
