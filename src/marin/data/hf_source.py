"""Hugging Face datasets as a document source: a hub id, a local dataset folder, or a `save_to_disk` folder.

Online, a hub id is streamed (`streaming=True`), so `sample_count` reads only the records it needs.
In offline mode (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE) a hub id is read from the local HF cache, and
a miss is an error that says how to provide the data. Local folders work either way.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import storage
from marin.data.file_documents import ShardStats, report_bad
from marin.execution.errors import MarinError

ROWS_PER_MAP_SHARD = 50_000


class SourceUnavailableError(MarinError):
    """A dataset source cannot be read here (not cached while offline, no such dataset, no such split)."""


def hf_datasets_offline() -> bool:
    """Whether Hugging Face datasets must not use the network."""
    return any(
        os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
        for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    )


def _is_saved_to_disk(path: str) -> bool:
    return storage.exists(storage.join(path, "state.json")) or storage.exists(
        storage.join(path, "dataset_dict.json")
    )


def resolved_revision(dataset: str, revision: str | None) -> str | None:
    """The commit sha a hub dataset resolves to (for provenance): a full sha as given, else the local
    HF cache's ref, else (online only) the hub's answer; None when it cannot be known here."""
    if revision and len(revision) == 40 and all(c in "0123456789abcdef" for c in revision):
        return revision
    from huggingface_hub import constants

    ref = os.path.join(
        constants.HF_HUB_CACHE, "datasets--" + dataset.replace("/", "--"), "refs", revision or "main"
    )
    try:
        with open(ref) as f:
            return f.read().strip() or None
    except OSError:
        pass
    if hf_datasets_offline():
        return None
    try:
        from huggingface_hub import HfApi

        return HfApi().dataset_info(dataset, revision=revision).sha
    except Exception:  # provenance only: an unreachable hub must not fail the step
        return None


@lru_cache(maxsize=8)
def open_hf_dataset(
    dataset: str, config: str | None, split: str, revision: str | None = None
) -> tuple[str, Any]:
    """("map", datasets.Dataset) or ("stream", datasets.IterableDataset) for one split; cached per process."""
    import datasets

    if _is_saved_to_disk(dataset):
        loaded = datasets.load_from_disk(dataset)
        if isinstance(loaded, datasets.DatasetDict):
            if split not in loaded:
                raise SourceUnavailableError(
                    f"dataset folder {dataset!r} has splits {list(loaded)}, not {split!r}"
                )
            loaded = loaded[split]
        return "map", loaded
    is_local = storage.is_local(dataset) and os.path.isdir(os.path.expanduser(dataset))
    offline = hf_datasets_offline() and not is_local
    try:
        pinned = {"revision": revision} if revision and not is_local else {}
        if offline:
            return "map", datasets.load_dataset(dataset, config, split=split, **pinned)
        return "stream", datasets.load_dataset(dataset, config, split=split, streaming=True, **pinned)
    except (FileNotFoundError, ConnectionError, ValueError, OSError) as e:
        cause = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        if offline:
            raise SourceUnavailableError(
                f"dataset {dataset!r} (split {split!r}) is not in the local Hugging Face cache and offline mode "
                "is on (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE). Provide it locally: run once with network access "
                f"(python -c \"import datasets; datasets.load_dataset('{dataset}', split='{split}')\"), or save it "
                "with save_to_disk(dir) / download its parquet or jsonl files and pass that folder as source= "
                "(or the files as paths=), or use source='marin://tinystories-synth' for the embedded demo corpus. "
                f"Cause: {cause}"
            ) from None
        raise SourceUnavailableError(f"cannot load dataset {dataset!r} split {split!r}: {cause}") from None


@dataclass(frozen=True)
class HFShard:
    """One shard of a Hugging Face dataset: a file group when streaming, a row range when map-style."""

    dataset: str
    config: str | None
    split: str
    text_key: str
    index: int
    num_shards: int
    rows: tuple[int, int] | None = None  # map-style row range
    revision: str | None = None

    def describe(self) -> str:
        return f"{self.dataset}[{self.split}] shard {self.index}/{self.num_shards}"

    @property
    def known_length(self) -> int | None:
        return None if self.rows is None else self.rows[1] - self.rows[0]

    def texts(self, bad_records: str, stats: ShardStats) -> Iterator[str]:
        mode, ds = open_hf_dataset(self.dataset, self.config, self.split, self.revision)
        if self.text_key not in (ds.column_names or [self.text_key]):
            raise SourceUnavailableError(
                f"dataset {self.dataset!r} split {self.split!r} has no column {self.text_key!r} "
                f"(columns: {ds.column_names}); set text_key= to the text column"
            )
        if mode == "map":
            start, stop = self.rows
            rows = ds.select_columns([self.text_key])
            step = 1024
            for lo in range(start, stop, step):
                batch = rows[lo : min(lo + step, stop)][self.text_key]
                yield from self._checked(batch, lo, bad_records, stats)
        else:
            part = ds.shard(num_shards=self.num_shards, index=self.index) if self.num_shards > 1 else ds
            for row, record in enumerate(part):
                yield from self._checked([record.get(self.text_key)], row, bad_records, stats)

    def _checked(
        self, batch: list[Any], first_row: int, bad_records: str, stats: ShardStats
    ) -> Iterator[str]:
        for offset, text in enumerate(batch):
            if isinstance(text, str):
                yield text
            else:
                report_bad(
                    bad_records,
                    stats,
                    self.describe(),
                    first_row + offset + 1,
                    f"column {self.text_key!r} is {type(text).__name__}, not a string",
                )


def hf_shards(
    dataset: str, config: str | None, split: str, text_key: str, revision: str | None = None
) -> list[HFShard]:
    """The shards of one split: the dataset's own file shards when streaming, row ranges otherwise."""
    mode, ds = open_hf_dataset(dataset, config, split, revision)
    if mode == "stream":
        n = max(1, int(ds.n_shards))
        return [HFShard(dataset, config, split, text_key, i, n, None, revision) for i in range(n)]
    total = len(ds)
    n = max(1, math.ceil(total / ROWS_PER_MAP_SHARD))
    bounds = [round(i * total / n) for i in range(n + 1)]
    return [
        HFShard(dataset, config, split, text_key, i, n, (bounds[i], bounds[i + 1]), revision)
        for i in range(n)
    ]
