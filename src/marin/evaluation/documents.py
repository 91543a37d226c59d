"""The documents an evaluation scores: raw text files, or the documents of a token cache split.

Every document carries its domain (the dataset name, or a source tag inside the dataset) and the
UTF-8 byte length of its ORIGINAL text, which is what bits-per-byte divides by.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import ClassVar

from marin.data.file_documents import BAD_RECORD_POLICIES, ShardStats, infer_format, read_text_records
from marin.evaluation.errors import EvalDataError
from zephyr import PlanError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TextDataset:
    """Raw text to evaluate on, read exactly as the data pipeline reads files (`marin.data.file_documents`).

    `.jsonl`/`.json` (text under `text_field`), `.parquet`, or `.txt` (one document per line, blank
    lines skipped), each optionally `.gz`/`.zst` compressed. When `domain_field` is set and a record
    has it, that record's domain is `{name}/{record[domain_field]}`. A malformed record fails the
    step naming file:line under `bad_records="fail"`, or is skipped and counted under `"skip"`.
    Paths are fsspec URLs or local paths; the step's cache key holds the paths, so change the name
    or paths when the files' contents change.
    """

    # keyed even at their defaults: these keys were published before defaults stayed out (marin.execution.keyed)
    KEYED_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("text_field", "domain_field", "bad_records")

    name: str
    paths: tuple[str, ...]
    text_field: str = "text"
    domain_field: str | None = None
    bad_records: str = "fail"

    def __post_init__(self) -> None:
        if isinstance(self.paths, str):
            object.__setattr__(self, "paths", (self.paths,))
        object.__setattr__(self, "paths", tuple(str(p) for p in self.paths))
        if not self.name or not self.paths:
            raise EvalDataError(f"TextDataset {self.name!r}: give a name and at least one path")
        if self.bad_records not in BAD_RECORD_POLICIES:
            raise EvalDataError(
                f"TextDataset {self.name!r}: bad_records={self.bad_records!r}; use one of "
                f"{list(BAD_RECORD_POLICIES)}"
            )
        for path in self.paths:
            try:
                infer_format(path)
            except PlanError as e:
                raise EvalDataError(f"TextDataset {self.name!r}: {e}") from None


@dataclass(frozen=True)
class EvalDocument:
    """One document to score: text (raw datasets) or tokens (token caches), with its domain and bytes."""

    dataset: str
    domain: str
    num_bytes: int
    text: str | None = None
    tokens: tuple[int, ...] | None = None


def read_text_dataset(dataset: TextDataset) -> list[EvalDocument]:
    """All documents of `dataset`, in path order then file order."""
    docs: list[EvalDocument] = []
    stats = ShardStats()
    domain_field = dataset.domain_field
    for path in dataset.paths:
        for text, record in read_text_records(path, dataset.text_field, dataset.bad_records, stats):
            tag = record.get(domain_field) if domain_field and record is not None else None
            docs.append(_document(dataset, text, tag))
    if stats.bad_records:
        logger.warning(
            "dataset %r: skipped %d malformed record(s), e.g. %s",
            dataset.name,
            stats.bad_records,
            "; ".join(stats.bad_examples),
        )
    if not docs:
        raise EvalDataError(f"dataset {dataset.name!r} has no documents in {list(dataset.paths)}")
    return docs


def _document(dataset: TextDataset, text: str, tag: object) -> EvalDocument:
    domain = f"{dataset.name}/{tag}" if tag is not None else dataset.name
    return EvalDocument(dataset.name, domain, len(text.encode("utf-8")), text=text)


def read_token_cache(
    name: str, path: str, split: str, vocab_size: int, max_documents: int | None = None
) -> list[EvalDocument]:
    """The documents of split `split` of the token cache at `path`, as token ids with their byte counts.

    A leading BOS and a trailing EOS the tokenize step added are dropped, so the scored tokens cover the
    original text and nothing else, as when raw text is tokenized for evaluation.
    """
    from marin.data.token_cache import TokenCache

    cache = TokenCache.open(path)
    if cache.vocab_size > vocab_size:
        raise EvalDataError(
            f"dataset {name!r} ({path}) was tokenized with a vocabulary of {cache.vocab_size} ids but the "
            f"model has {vocab_size}: evaluate on data tokenized with the model's tokenizer"
        )
    token_split = cache.split(split)
    count = (
        token_split.num_documents if max_documents is None else min(max_documents, token_split.num_documents)
    )
    # Only the special tokens the tokenize step added are dropped, as its ledger records them.
    bos = cache.bos_id if cache.ledger.get("bos_policy", "none") != "none" else None
    eos = cache.eos_id if cache.ledger.get("eos_policy") == "append" else None
    docs = []
    for i in range(count):
        tokens = [int(t) for t in token_split.document(i)]
        if tokens and bos is not None and tokens[0] == bos:
            tokens = tokens[1:]
        if tokens and eos is not None and tokens[-1] == eos:
            tokens = tokens[:-1]
        docs.append(EvalDocument(name, name, int(token_split.document_bytes(i)), tokens=tuple(tokens)))
    return docs
