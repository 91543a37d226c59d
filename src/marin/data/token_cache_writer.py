"""Writing token caches: one shard's files streamed to temporary names then published, and the ledger.

A shard is published by renaming its `.bytes`, then `.offsets`, then `.tokens` file into place, so
a `.tokens` file present means the whole shard is there: a killed run leaves at most temporary
files, which the next attempt deletes before rewriting that shard.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np
import orjson

import storage
from marin.data.token_cache import LEDGER, SUFFIXES, shard_name, shard_path

_TMP_MARK = ".tmp-"


@dataclass(frozen=True)
class ShardSummary:
    """The counts of one written shard, as the ledger records them."""

    split: str
    index: int
    documents: int
    tokens: int
    bytes: int

    def to_json(self) -> dict[str, int]:
        return {"documents": self.documents, "tokens": self.tokens, "bytes": self.bytes}


def _open_for_write(path: str) -> BinaryIO:
    return storage.open_file(storage.absolute(path), "wb", buffering=1 << 20)


class ShardWriter:
    """Streams one shard of one split: documents are appended in order, `publish()` makes it visible."""

    def __init__(self, root: str, split: str, index: int, dtype: np.dtype):
        self.root, self.split, self.index, self.dtype = root, split, index, np.dtype(dtype)
        storage.makedirs(storage.join(root, split))
        remove_partial_shard(root, split, index)
        tag = f"{_TMP_MARK}{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._finals = {s: shard_path(root, split, index, s) for s in SUFFIXES}
        self._temps = {s: self._finals[s] + tag for s in SUFFIXES}
        self._files = {s: _open_for_write(self._temps[s]) for s in SUFFIXES}
        self._files[".offsets"].write(np.zeros(1, "<i8").tobytes())
        self.documents = self.tokens = self.bytes = 0

    def add(self, tokens: np.ndarray, doc_lengths: np.ndarray, doc_bytes: np.ndarray) -> None:
        """Append documents: their concatenated `tokens`, each one's token count and text byte length."""
        if len(doc_lengths) == 0:
            return
        ends = np.cumsum(doc_lengths, dtype=np.int64) + self.tokens
        self._files[".tokens"].write(np.ascontiguousarray(tokens, dtype=self.dtype).tobytes())
        self._files[".offsets"].write(ends.astype("<i8", copy=False).tobytes())
        self._files[".bytes"].write(np.asarray(doc_bytes, dtype="<i8").tobytes())
        self.documents += len(doc_lengths)
        self.tokens = int(ends[-1])
        self.bytes += int(np.sum(doc_bytes, dtype=np.int64))

    def publish(self) -> ShardSummary:
        """Close the files and rename them into place, `.tokens` last."""
        for f in self._files.values():
            f.close()
        for suffix in SUFFIXES:
            storage.move(self._temps[suffix], self._finals[suffix])
        return ShardSummary(self.split, self.index, self.documents, self.tokens, self.bytes)

    def abort(self) -> None:
        """Close and delete the temporary files (after an error)."""
        for suffix, f in self._files.items():
            f.close()
            storage.remove(self._temps[suffix])


def remove_partial_shard(root: str, split: str, index: int) -> None:
    """Delete temporary files a killed attempt left for this shard."""
    stem = shard_name(index) + "."
    folder = storage.join(root, split)
    for name in storage.list_names(folder):
        if name.startswith(stem) and _TMP_MARK in name:
            storage.remove(storage.join(folder, name))


def write_ledger(root: str, ledger: dict[str, Any]) -> None:
    """Write ledger.json atomically; it is written last, so its presence means the cache is complete."""
    storage.write_atomic(
        storage.join(root, LEDGER), orjson.dumps(ledger, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
    )
