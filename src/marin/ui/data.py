"""Paging through data files and token caches without loading whole files.

jsonl and txt (plain, .gz, .zst) are streamed and only the lines of the asked page are kept; parquet
reads only the row groups that hold the page; a token cache decodes only the documents of the page
with the cache's own tokenizer.
"""

from __future__ import annotations

import io
import itertools
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson

import storage
from marin.ui.paths import open_binary

LINE_CAP = 16 << 10  # characters of one record shown
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


def _shown(line: str, as_json: bool) -> Any:
    line = line.rstrip("\n")
    if len(line) > LINE_CAP:
        return line[:LINE_CAP] + f" ... ({len(line) - LINE_CAP} more characters)"
    if as_json:
        try:
            return orjson.loads(line)
        except orjson.JSONDecodeError:
            return line
    return line


def page_file(path: str, start: int, size: int) -> Page:
    """Records `start` .. `start + size` of a jsonl/txt/parquet file (compressed or not)."""
    if path.endswith(PARQUET_SUFFIXES):
        return _page_parquet(path, start, size)
    as_json = ".json" in storage.basename(path)
    with _text_stream(path) as stream:
        lines = list(itertools.islice(stream, start, start + size + 1))
    return Page([_shown(line, as_json) for line in lines[:size]], start, len(lines) > size)


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

    data = storage.read_bytes(storage.join(tokenizer_dir, "tokenizer.json"))
    if data is None:
        return None
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
