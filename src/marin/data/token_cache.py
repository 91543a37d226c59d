"""Token caches: the on-disk layout a tokenize step writes, and the reader training and evaluation use.

Layout of one cache (a tokenize step's output folder)::

    ledger.json                  format, dtype, vocab_size, tokenizer fingerprint, eos/bos policy,
                                 source, sample_count, per split: documents, tokens, bytes, shards
    tokenizer/                   the tokenizer's files (AutoTokenizer.from_pretrained loads them)
    {split}/part-00000.tokens    flat token ids, little-endian uint16 (vocab < 65,536) or uint32
    {split}/part-00000.offsets   int64 start offset of each document in that shard, documents + 1 entries
    {split}/part-00000.bytes     int64 UTF-8 byte length of each document's original text

Every document's tokens end with the EOS id (`eos_policy: "append"`); no BOS is added
(`bos_policy: "none"`). Local caches are memory-mapped; remote ones (gs://, s3://, ...) are read
with ranged reads through fsspec, so opening a cache reads only the ledger.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import orjson

import storage
from marin.execution.errors import MarinError

FORMAT = "marin-token-cache"
FORMAT_VERSION = 1
EOS_POLICY = "append"  # every document ends with the EOS id
BOS_POLICY = "none"  # no BOS is added
LEDGER = "ledger.json"
TOKENIZER_DIR = "tokenizer"
TRAIN = "train"
VALIDATION = "validation"
SPLITS = (TRAIN, VALIDATION)
SUFFIXES = (".bytes", ".offsets", ".tokens")  # the order a shard's files are published; .tokens last


class TokenCacheError(MarinError):
    """A token cache is missing, incomplete, or asked for something it does not hold."""


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 when every id fits (vocab < 65,536), else uint32; always little-endian."""
    return np.dtype("<u2") if vocab_size < 65_536 else np.dtype("<u4")


def shard_name(index: int) -> str:
    """The file stem of shard `index`: part-00000."""
    return f"part-{index:05d}"


def shard_path(root: str, split: str, index: int, suffix: str) -> str:
    """Where one file of a shard lives."""
    return storage.join(root, split, shard_name(index) + suffix)


class _Array:
    """A read-only 1-D array file: memory-mapped when local, ranged reads through fsspec otherwise."""

    def __init__(self, path: str, dtype: np.dtype, length: int):
        self.path, self.dtype, self.length = path, dtype, length

    @cached_property
    def _mmap(self) -> np.ndarray | None:
        if not storage.is_local(self.path):
            return None
        if self.length == 0:
            return np.empty(0, self.dtype)
        return np.memmap(storage.absolute(self.path), dtype=self.dtype, mode="r", shape=(self.length,))

    def read(self, start: int, stop: int) -> np.ndarray:
        if not 0 <= start <= stop <= self.length:
            raise TokenCacheError(f"range [{start}, {stop}) is outside {self.path} ({self.length} entries)")
        if self._mmap is not None:
            return np.asarray(self._mmap[start:stop])
        if start == stop:
            return np.empty(0, self.dtype)
        size = self.dtype.itemsize
        data = storage.read_range(self.path, start * size, stop * size)
        return np.frombuffer(data, dtype=self.dtype)


@dataclass(frozen=True)
class _Shard:
    documents: int
    tokens: int
    offsets: _Array
    tokens_file: _Array
    bytes_file: _Array


class TokenSplit:
    """One split of a cache: documents and the concatenation of their tokens, with O(1) random access.

    Shard lookup is a binary search over the cumulative counts (a handful of shards), then a direct
    read: no scan, whatever the position.
    """

    def __init__(self, root: str, name: str, entry: dict[str, Any], dtype: np.dtype):
        self.name = name
        self.num_documents = int(entry["documents"])
        self.num_tokens = int(entry["tokens"])
        self.num_bytes = int(entry["bytes"])
        self._shards: list[_Shard] = []
        self._doc_starts: list[int] = []
        self._doc_ends: list[int] = []
        self._token_starts: list[int] = []
        self._token_ends: list[int] = []
        docs = toks = 0
        for index, shard in enumerate(entry["shards"]):
            n_docs, n_toks = int(shard["documents"]), int(shard["tokens"])
            self._doc_starts.append(docs)
            self._token_starts.append(toks)
            self._shards.append(
                _Shard(
                    documents=n_docs,
                    tokens=n_toks,
                    offsets=_Array(shard_path(root, name, index, ".offsets"), np.dtype("<i8"), n_docs + 1),
                    tokens_file=_Array(shard_path(root, name, index, ".tokens"), dtype, n_toks),
                    bytes_file=_Array(shard_path(root, name, index, ".bytes"), np.dtype("<i8"), n_docs),
                )
            )
            docs += n_docs
            toks += n_toks
            self._doc_ends.append(docs)
            self._token_ends.append(toks)

    def __len__(self) -> int:
        return self.num_documents

    def __repr__(self) -> str:
        return f"TokenSplit({self.name!r}, documents={self.num_documents}, tokens={self.num_tokens})"

    def _doc_location(self, i: int) -> tuple[_Shard, int]:
        if not 0 <= i < self.num_documents:
            raise TokenCacheError(
                f"document {i} is outside split {self.name!r} ({self.num_documents} documents)"
            )
        k = bisect.bisect_right(self._doc_ends, i)  # the first shard ending after i (skips empty shards)
        return self._shards[k], i - self._doc_starts[k]

    def document(self, i: int) -> np.ndarray:
        """The token ids of document `i`, ending with EOS."""
        shard, j = self._doc_location(i)
        start, stop = shard.offsets.read(j, j + 2)
        return shard.tokens_file.read(int(start), int(stop))

    def document_bytes(self, i: int) -> int:
        """The UTF-8 byte length of document `i`'s original text (for bits-per-byte)."""
        shard, j = self._doc_location(i)
        return int(shard.bytes_file.read(j, j + 1)[0])

    def _pieces(self, start: int, stop: int) -> list[tuple[_Array, int, int]]:
        """The (shard tokens file, local start, local stop) pieces of tokens [start, stop)."""
        if not 0 <= start <= stop <= self.num_tokens:
            raise TokenCacheError(
                f"token range [{start}, {stop}) is outside split {self.name!r} ({self.num_tokens} tokens)"
            )
        pieces = []
        pos = start
        while pos < stop:
            k = bisect.bisect_right(self._token_ends, pos)
            local = pos - self._token_starts[k]
            take = min(stop - pos, self._shards[k].tokens - local)
            pieces.append((self._shards[k].tokens_file, local, local + take))
            pos += take
        return pieces

    def _joined(self, parts: list[np.ndarray]) -> np.ndarray:
        if len(parts) == 1:
            return parts[0]
        dtype = self._shards[0].tokens_file.dtype if self._shards else np.dtype("<u2")
        return np.concatenate(parts) if parts else np.empty(0, dtype)

    def tokens(self, start: int, stop: int) -> np.ndarray:
        """Tokens `start` up to `stop` of the split's concatenated documents (may span shards)."""
        return self._joined([file.read(a, b) for file, a, b in self._pieces(start, stop)])

    def tokens_many(self, ranges: Sequence[tuple[int, int]]) -> list[np.ndarray]:
        """`tokens(start, stop)` of each range, read together: locally from the memory maps; on an
        object store grouped by shard file, coalesced and read at once (`storage.read_ranges`), so a
        batch of windows costs about one round trip rather than one per window."""
        pieces = [self._pieces(start, stop) for start, stop in ranges]
        if not self._shards or storage.is_local(self._shards[0].tokens_file.path):
            return [self._joined([file.read(a, b) for file, a, b in parts]) for parts in pieces]
        requests = [
            (file.path, a * file.dtype.itemsize, b * file.dtype.itemsize)
            for parts in pieces
            for file, a, b in parts
        ]
        datas = iter(storage.read_ranges(requests))
        out = []
        for parts in pieces:
            arrays = [np.frombuffer(next(datas), dtype=file.dtype) for file, _, _ in parts]
            out.append(self._joined(arrays))
        return out

    def document_offsets(self) -> np.ndarray:
        """Start offset of every document in the concatenated tokens, plus the end: num_documents + 1."""
        out = [np.zeros(1, np.int64)]
        for shard, base in zip(self._shards, self._token_starts, strict=True):
            out.append(shard.offsets.read(1, shard.documents + 1).astype(np.int64) + base)
        return np.concatenate(out)


class TokenCache:
    """A finished token cache: its ledger, tokenizer folder and splits."""

    def __init__(self, root: str, ledger: dict[str, Any]):
        self.root = root
        self.ledger = ledger
        self.dtype = np.dtype(ledger["dtype"])
        self.vocab_size: int = int(ledger["vocab_size"])
        self.eos_id: int = int(ledger["eos_id"])
        self.bos_id: int | None = ledger.get("bos_id")
        self.tokenizer_fingerprint: str = ledger["tokenizer_fingerprint"]
        self.tokenizer_path = storage.join(root, TOKENIZER_DIR)
        self._splits: dict[str, TokenSplit] = {}

    @classmethod
    def open(cls, path: str) -> TokenCache:
        """Open the cache written at `path` (a tokenize step's output); reads only the ledger."""
        data = storage.read_bytes(storage.join(path, LEDGER))
        if data is None:
            raise TokenCacheError(
                f"{path!r} holds no finished token cache (no {LEDGER}): run the tokenize step first, "
                "or check that the path is the step's output folder"
            )
        ledger = orjson.loads(data)
        if ledger.get("format") != FORMAT or ledger.get("format_version") != FORMAT_VERSION:
            raise TokenCacheError(
                f"{path}/{LEDGER} is format {ledger.get('format')!r} v{ledger.get('format_version')}, "
                f"this reader reads {FORMAT!r} v{FORMAT_VERSION}: re-run the tokenize step"
            )
        return cls(path, ledger)

    @property
    def split_names(self) -> list[str]:
        """The splits this cache holds (train, validation)."""
        return list(self.ledger["splits"])

    def split(self, name: str) -> TokenSplit:
        """One split by name."""
        if name not in self._splits:
            entry = self.ledger["splits"].get(name)
            if entry is None:
                raise TokenCacheError(f"cache {self.root!r} has no split {name!r}; it has {self.split_names}")
            self._splits[name] = TokenSplit(self.root, name, entry, self.dtype)
        return self._splits[name]

    def __repr__(self) -> str:
        return f"TokenCache({self.root!r}, splits={self.split_names}, vocab_size={self.vocab_size})"
