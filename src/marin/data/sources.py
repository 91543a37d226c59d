"""Document sources: what `tokenized(source=... | paths=...)` and `train_tokenizer()` read.

A source resolves (at run time, never at declaration) into an ordered list of shards. Every shard
is a small picklable value whose `texts()` yields its documents in a fixed order, so the source's
canonical order is shard order then record order, and `sample_count` means "the first N documents
in that order", whatever backend runs the shards.

Source names:
- `marin://tinystories-synth`: the embedded corpus of generated children's stories (`marin.data.corpus`).
- anything else given as `source=`: a Hugging Face dataset id, a local HF dataset folder (parquet /
  jsonl files), or a `save_to_disk` folder (see `hf_source`).
- `paths=`: local or fsspec files and globs: JSONL (.gz, .zst), Parquet, text (see `file_documents`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Protocol

from marin.data import corpus
from marin.data.file_documents import BAD_RECORD_POLICIES, ShardStats, infer_format, read_texts
from marin.data.hf_source import hf_shards, resolved_revision
from marin.execution.errors import MarinError
from marin.execution.inputs import hub_input
from storage import list_files

EMBEDDED_SOURCE = corpus.SOURCE_NAME
EMBEDDED_SHARD_SIZE = 5_000


class SourceError(MarinError):
    """A source is declared wrongly or holds fewer documents than asked for."""


class DocumentShard(Protocol):
    """One unit of parallel reading: its documents in a fixed order."""

    def describe(self) -> str: ...

    @property
    def known_length(self) -> int | None: ...

    def texts(self, bad_records: str, stats: ShardStats) -> Iterator[str]: ...


@dataclass(frozen=True)
class EmbeddedShard:
    """Stories `start` up to `stop` of the embedded corpus."""

    start: int
    stop: int

    def describe(self) -> str:
        return f"{EMBEDDED_SOURCE}[{self.start}:{self.stop}]"

    @property
    def known_length(self) -> int:
        return self.stop - self.start

    def texts(self, bad_records: str, stats: ShardStats) -> Iterator[str]:
        return corpus.stories(self.start, self.stop)


@dataclass(frozen=True)
class FileShard:
    """One input file."""

    path: str
    text_key: str

    def describe(self) -> str:
        return self.path

    @property
    def known_length(self) -> None:
        return None

    def texts(self, bad_records: str, stats: ShardStats) -> Iterator[str]:
        return read_texts(self.path, self.text_key, bad_records, stats)


@dataclass(frozen=True)
class PlannedShard:
    """A shard and how many of its documents to take (None: all of them)."""

    index: int
    shard: DocumentShard
    limit: int | None

    def texts(self, bad_records: str, stats: ShardStats) -> Iterator[str]:
        texts = self.shard.texts(bad_records, stats)
        return texts if self.limit is None else islice(texts, self.limit)


def describe_source(source: str | None, paths: Sequence[str] | None) -> dict:
    """The JSON description of a source that ledgers and hash_attrs record (touches nothing)."""
    if (source is None) == (paths is None):
        raise SourceError("give exactly one of source= (a dataset name) or paths= (files or globs)")
    if paths is not None:
        if isinstance(paths, str):
            raise SourceError(
                f"paths= takes a list of files or globs, got the string {paths!r}; wrap it in a list"
            )
        return {"kind": "files", "paths": list(paths)}
    if source == EMBEDDED_SOURCE:
        return {"kind": "embedded", "name": source, "size": corpus.CORPUS_SIZE}
    if source.startswith("marin://"):
        raise SourceError(f"unknown embedded source {source!r}; the embedded corpus is {EMBEDDED_SOURCE!r}")
    return {"kind": "huggingface", "dataset": source}


def resolve_shards(
    source: str | None,
    paths: Sequence[str] | None,
    text_key: str = "text",
    split: str = "train",
    config: str | None = None,
    revision: str | None = None,
) -> list[DocumentShard]:
    """The ordered shards of a source (lists files or asks the HF hub: call at run time only)."""
    kind = describe_source(source, paths)["kind"]
    if kind == "files":
        files = list_files(list(paths))
        for f in files:
            infer_format(f)  # unknown extensions fail before any work starts
        return [FileShard(f, text_key) for f in files]
    if kind == "embedded":
        size = corpus.CORPUS_SIZE
        return [
            EmbeddedShard(a, min(a + EMBEDDED_SHARD_SIZE, size)) for a in range(0, size, EMBEDDED_SHARD_SIZE)
        ]
    return list(hf_shards(source, config, split, text_key, revision))


def plan_shards(
    shards: Sequence[DocumentShard], sample_count: int | None, bad_records: str
) -> list[PlannedShard]:
    """Take every shard, or exactly the first `sample_count` documents in canonical order.

    Shards of unknown length are counted by reading them (without tokenizing) only as far as needed.
    """
    if sample_count is None:
        return [PlannedShard(i, s, None) for i, s in enumerate(shards)]
    planned, remaining = [], sample_count
    for i, shard in enumerate(shards):
        if remaining == 0:
            break
        n = shard.known_length
        if n is None:
            n = sum(1 for _ in islice(shard.texts(bad_records, ShardStats()), remaining))
        take = min(n, remaining)
        planned.append(PlannedShard(i, shard, take))
        remaining -= take
    if remaining:
        raise SourceError(
            f"sample_count={sample_count} but the source holds only {sample_count - remaining} documents; "
            "lower sample_count or pass sample_count=None for all of them"
        )
    return planned


def iter_documents(planned: Sequence[PlannedShard], bad_records: str, stats: ShardStats) -> Iterator[str]:
    """All planned documents in canonical order (for single-process consumers such as tokenizer training)."""
    for p in planned:
        yield from p.texts(bad_records, stats)


@dataclass(frozen=True, kw_only=True)
class SourceFields:
    """Which documents a step reads: a source name or files, the text field, the split, how many, bad-record policy.

    `tokenized()` and `train_tokenizer()` take these fields as keywords (their handles extend this
    class); `SourceConfig` is the resolved form a step reads. `sample_count` takes exactly the first
    N documents in canonical order (None: all). `bad_records` is "fail" (an error naming file:line)
    or "skip" (skip and count malformed records). `revision` pins a hub dataset's commit, tag or
    branch.
    """

    source: str | None = None
    paths: tuple[str, ...] | None = None
    text_key: str = "text"
    split: str = "train"
    hf_config: str | None = None
    sample_count: int | None = None
    bad_records: str = "fail"
    revision: str | None = None


@dataclass(frozen=True, kw_only=True)
class SourceConfig(SourceFields):
    """A step's source with every path resolved: what it describes in keys and ledgers, and reads."""

    def check(self) -> None:
        """Validate the declaration without touching any file or the network."""
        kind = describe_source(self.source, self.paths)["kind"]
        if self.revision is not None and (kind != "huggingface" or self._local_folder() or not self.revision):
            raise SourceError(
                f"revision={self.revision!r} pins a Hugging Face hub dataset; source={self.source!r} "
                "is not one (drop revision=)"
            )
        if self.bad_records not in BAD_RECORD_POLICIES:
            raise SourceError(f"bad_records={self.bad_records!r}; choose one of {BAD_RECORD_POLICIES}")
        n = self.sample_count
        if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
            raise SourceError(f"sample_count must be a positive int or None, got {n!r}")

    def describe(self) -> dict:
        """The JSON description cache keys and ledgers record."""
        desc = describe_source(self.source, self.paths) | {
            "text_key": self.text_key,
            "sample_count": self.sample_count,
            "bad_records": self.bad_records,
        }
        if desc["kind"] == "huggingface":
            desc |= {"split": self.split, "config": self.hf_config}
            if self.revision is not None:
                desc["revision"] = self.revision
        return desc

    def provenance(self) -> dict:
        """`describe()` plus, for a hub dataset, the commit sha it resolved to (run time: may ask the hub)."""
        desc = self.describe()
        if desc["kind"] == "huggingface" and not self._local_folder():
            desc["resolved_revision"] = resolved_revision(self.source, self.revision)
        return desc

    def inputs(self) -> tuple[str, ...]:
        """What the step reads, as `StepSpec.inputs`: the files or globs, a local dataset folder's
        files, or the hub dataset (pinned when `revision` is given). The embedded corpus: nothing."""
        kind = describe_source(self.source, self.paths)["kind"]
        if kind == "files":
            return tuple(self.paths)
        if kind == "embedded":
            return ()
        if self._local_folder() or "://" in self.source:
            return (self.source.rstrip("/") + "/**",)
        return (hub_input(self.source, self.revision),)

    def _local_folder(self) -> bool:
        return (
            self.source is not None
            and "://" not in self.source
            and os.path.isdir(os.path.expanduser(self.source))
        )

    def where(self, shown: int = 5) -> str:
        """The source as an error message names it: its files (the first `shown`), or its name."""
        kind = describe_source(self.source, self.paths)["kind"]
        if kind != "files":
            return f"{self.source}" + (f" (split {self.split!r})" if kind == "huggingface" else "")
        paths = list(self.paths)
        more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
        return ", ".join(paths[:shown]) + more

    def plan(self) -> list[PlannedShard]:
        """Resolve the shards and apply `sample_count` (run time only: lists files, may reach the hub)."""
        shards = resolve_shards(
            self.source, self.paths, self.text_key, self.split, self.hf_config, self.revision
        )
        return plan_shards(shards, self.sample_count, self.bad_records)
