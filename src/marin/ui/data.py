"""Paging through data files and token caches without loading whole files.

jsonl and txt (plain, .gz, .zst) are streamed and only the lines of the asked page are kept; parquet
reads only the row groups that hold the page; a token cache decodes only the documents of the page
with the cache's own tokenizer.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson

import storage
from marin.ui.paths import open_binary

LINE_CAP = 16 << 10  # characters of one record shown
TOKENIZER_CAP = 64 << 20  # bytes of a token cache's tokenizer.json the UI loads to decode its text
TEXT_SUFFIXES = (
    ".jsonl",
    ".json",
    ".txt",
    ".jsonl.gz",
    ".jsonl.zst",
    ".txt.gz",
    ".txt.zst",
    ".json.gz",
    ".json.zst",
    ".md",
)
PARQUET_SUFFIXES = (".parquet",)


@dataclass(frozen=True)
class Page:
    """One page of records: each a display string (or a dict for parquet/jsonl), and whether more follow."""

    records: list[Any]
    start: int
    has_more: bool


def is_browsable(name: str) -> bool:
    """Whether the data page can page through a file with this name."""
    return name.endswith(TEXT_SUFFIXES + PARQUET_SUFFIXES)


def _text_stream(path: str) -> io.TextIOBase:
    raw = open_binary(path)
    if path.endswith(".gz"):
        import gzip

        raw = gzip.GzipFile(fileobj=raw)
    elif path.endswith(".zst"):
        import zstandard

        raw = zstandard.ZstdDecompressor().stream_reader(raw, closefd=True)
    return io.TextIOWrapper(raw, encoding="utf-8", errors="replace")


def _capped_lines(stream: io.TextIOBase, start: int, count: int) -> Iterator[tuple[str, int]]:
    """Lines `start` .. `start + count` of `stream`, each as its first LINE_CAP characters (newline
    dropped) and how many characters past those it had. No more than LINE_CAP + 1 characters of a
    line are held at once: a huge file with no newline is skimmed, not loaded."""
    for index in range(start + count):
        line = stream.readline(LINE_CAP + 1)
        if not line:
            return
        if line.endswith("\n"):
            head, more = line[:-1], 0
        else:
            head, more = line[:LINE_CAP], max(0, len(line) - LINE_CAP)
            if len(line) > LINE_CAP:  # the line goes on: skip its rest, a bounded chunk at a time
                while rest := stream.readline(LINE_CAP):
                    if rest.endswith("\n"):
                        more += len(rest) - 1
                        break
                    more += len(rest)
        if index >= start:
            yield head, more


def _shown(line: str, more: int, as_json: bool) -> Any:
    if more:
        return line + f" ... ({more} more characters)"
    if as_json:
        try:
            return orjson.loads(line)
        except orjson.JSONDecodeError:
            return line
    return line


def page_file(path: str, start: int, size: int) -> Page:
    """Records `start` .. `start + size` of a jsonl/txt/parquet file (compressed or not); each line is
    read only up to LINE_CAP characters (see `_capped_lines`)."""
    if path.endswith(PARQUET_SUFFIXES):
        return _page_parquet(path, start, size)
    as_json = ".json" in storage.basename(path)
    with _text_stream(path) as stream:
        lines = list(_capped_lines(stream, start, size + 1))
    return Page([_shown(line, more, as_json) for line, more in lines[:size]], start, len(lines) > size)


def _page_parquet(path: str, start: int, size: int) -> Page:
    import pyarrow.parquet as pq

    with open_binary(path) as f:
        parquet = pq.ParquetFile(f)
        meta = parquet.metadata
        rows: list[dict] = []
        first = 0
        for group in range(meta.num_row_groups):
            count = meta.row_group(group).num_rows
            if first + count > start and len(rows) < size:
                table = parquet.read_row_group(group)
                lo = max(0, start - first)
                rows.extend(table.slice(lo, size - len(rows)).to_pylist())
            first += count
        return Page([_clip(r) for r in rows], start, start + len(rows) < meta.num_rows)


def _clip(row: dict) -> dict:
    return {
        k: (v[:LINE_CAP] + " ..." if isinstance(v, str) and len(v) > LINE_CAP else v) for k, v in row.items()
    }


@dataclass(frozen=True)
class TokenDocument:
    """One document of a token cache: its index, decoded text, token count and (on demand) ids."""

    index: int
    text: str
    num_tokens: int
    ids: list[int] | None


@lru_cache(maxsize=16)
def _tokenizer(tokenizer_dir: str):
    from tokenizers import Tokenizer

    try:  # a regular file only: the cache's tokenizer folder is named by a record anyone could edit
        with storage.open_regular(storage.join(tokenizer_dir, "tokenizer.json")) as f:
            data = f.read(TOKENIZER_CAP + 1)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if len(data) > TOKENIZER_CAP:
        return None  # no decoded text: token ids only
    return Tokenizer.from_str(data.decode("utf-8"))


def page_token_cache(path: str, split: str, start: int, size: int, with_ids: bool) -> tuple[Any, Page]:
    """The cache opened at `path` and one page of its `split`'s documents, decoded with its tokenizer."""
    from marin.data.token_cache import TokenCache

    cache = TokenCache.open(path)
    tokens = cache.split(split)
    tok = _tokenizer(cache.tokenizer_path)
    docs = []
    stop = min(tokens.num_documents, start + size)
    for i in range(start, stop):
        ids = [int(t) for t in tokens.document(i)]
        text = (
            tok.decode(ids, skip_special_tokens=False)
            if tok is not None
            else "(the cache holds no tokenizer.json)"
        )
        docs.append(TokenDocument(i, text[:LINE_CAP], len(ids), ids if with_ids else None))
    return cache, Page(docs, start, stop < tokens.num_documents)


SCORE_ROWS_CAP = 500_000  # attribute rows the data page reads to page by score
BUCKETS = ("lowest", "median", "highest")


@dataclass(frozen=True)
class ScoredDocument:
    """One document of a score step's input, with its score (text None when the UI could not find it)."""

    rank: int
    id: str
    score: float
    text: str | None


def _attribute_rows(folder: str) -> list[tuple[str, float]]:
    rows: list[tuple[str, float]] = []
    for name in sorted(storage.list_names(folder)):
        if not (name.startswith("part-") and name.endswith(TEXT_SUFFIXES)):
            continue
        with _text_stream(storage.join(folder, name)) as stream:
            for line in stream:
                row = orjson.loads(line)
                value = next(iter((row.get("attributes") or {}).values()), None)
                if isinstance(value, int | float):
                    rows.append((str(row.get("id")), float(value)))
                if len(rows) >= SCORE_ROWS_CAP:
                    return rows
    return rows


def page_by_score(folder: str, documents: list[str], bucket: str, start: int, size: int) -> Page:
    """A page of the scored documents in a score bucket: the `lowest` scores upward, the `highest`
    downward, or outward from the `median`; each with its text, found in the `documents` files."""
    rows = sorted(_attribute_rows(folder), key=lambda r: r[1])
    if bucket == "highest":
        order = rows[::-1]
    elif bucket == "median":
        mid = len(rows) // 2
        order = [rows[k] for k in sorted(range(len(rows)), key=lambda k: (abs(k - mid), k))]
    else:
        order = rows
    shown = order[start : start + size]
    texts = _texts_of({i for i, _ in shown}, documents)
    docs = [ScoredDocument(start + k, i, s, texts.get(i)) for k, (i, s) in enumerate(shown)]
    return Page(docs, start, start + size < len(order))


def _texts_of(ids: set[str], documents: list[str]) -> dict[str, str]:
    """The text of each id, streaming the document files until all are found."""
    found: dict[str, str] = {}
    for path in documents:
        with _text_stream(path) as stream:
            for line in stream:
                try:
                    record = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(record, dict) and str(record.get("id")) in ids:
                    found[str(record["id"])] = str(record.get("text", ""))[:LINE_CAP]
                    if len(found) == len(ids):
                        return found
    return found
