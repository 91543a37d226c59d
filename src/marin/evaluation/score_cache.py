"""The per-item score cache of an evaluation step: what is scored is kept, so nothing is scored twice.

A killed or preempted evaluation resumes without rescoring an item it wrote; an evaluation whose
dataset gained items, or whose curve gained checkpoints, scores only the new ones; any number of
processes score side by side, and a rerun may use another number.

The invariant, and the order of writes that keeps it:
1. An entry is `key -> value`. The key is the xxh3-128 of (the model's identity: the digest of its
   files; the scoring settings; the kind of request; the request's content, e.g. a window's token
   ids or a harness request's strings): `item_key`. The value is what scoring that request gives
   (a float, a pair, a string: JSON). A value depends on nothing but its key.
2. Entries are written in parts, `<cache>/part-<writer>-<n>.jsonl`, each written whole
   (`storage.write_atomic`: a temporary file renamed, or one PUT), holding the entries scored since
   the writer's last part: a reader sees whole parts or none, and a kill loses at most the entries
   scored since the last part (`flush_s` seconds of work, and the chunk in flight).
3. Work is cut into chunks by a fixed order over every item (cached or not), so a chunk holds the
   same items in every run; process r of w scores the chunks n with n % w == r, and writes a part
   only between chunks. A resumed run therefore scores whole chunks exactly as the killed run
   would have, and its results equal an uninterrupted run's bit for bit.
4. `<writer>` is the run's id and the process's rank, so parts never collide; a key is scored by
   the one process whose chunk holds it.
5. On start the cache reads its own folder (what an interrupted attempt of this step wrote) and,
   read only, the caches of earlier outputs of the same step (`sources`: other keys, e.g. before
   items were added). An entry taken from another output is written into this cache's own parts,
   so an output never depends on another one staying.
6. The cache is its step's: it lives in the step's output and is deleted only with it. Each key is
   written once, so it never holds more than the step's own items. When scoring is over, one
   process writes every entry to `scores.jsonl` (whole), then deletes the parts it read, which are
   files of its own output under its own naming, and the temporary file of a part whose writer was
   killed mid-write (`part-....jsonl.tmp-<pid>-<thread>`): every process of the step has flushed and
   met at the barrier by then, and the step's lease keeps any other run out, so no live writer owns one.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

import storage
from marin.execution.manifest import bytes_digest

CACHE_DIR = "score_cache"
COMPACT_FILE = "scores.jsonl"
DEFAULT_FLUSH_S = 2.0
_PART = re.compile(r"^part-(?P<writer>[0-9a-f]{12}-r\d+)-\d{6}\.jsonl$")
# A part's temporary file (storage.write_atomic's `<name>.tmp-<pid>-<thread>`), left by a writer killed mid-write.
_PART_TEMP = re.compile(r"^part-[0-9a-f]{12}-r\d+-\d{6}\.jsonl\.tmp-\d+-\d+$")


def item_key(model: str, settings: Any, kind: str, content: Any) -> str:
    """The cache key of one scored request: model identity, settings, kind and content, hashed."""
    return bytes_digest(orjson.dumps([model, settings, kind, content], option=orjson.OPT_SORT_KEYS))


@dataclass(frozen=True)
class Ranks:
    """This process's place among the processes scoring one evaluation, and how they wait for each other."""

    rank: int = 0
    world: int = 1
    barrier: Callable[[], None] | None = None

    def wait(self) -> None:
        """Return once every process got here (nothing to wait for alone)."""
        if self.world > 1 and self.barrier is not None:
            self.barrier()


def torch_ranks() -> Ranks:
    """The running torch.distributed group's ranks (one process when there is none)."""
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        return Ranks()
    return Ranks(dist.get_rank(), dist.get_world_size(), dist.barrier)


@dataclass
class CacheCounts:
    """Where the values one run used came from: scored by this run (any of its processes), found in
    the step's own folder (an interrupted attempt's), or taken from another output of the step."""

    computed: int = 0
    resumed: int = 0
    imported: int = 0

    def to_json(self) -> dict[str, int]:
        return {"computed": self.computed, "resumed": self.resumed, "imported": self.imported}


@dataclass
class ScoreCache:
    """The entries of one step's cache folder (see the module docstring), plus read-only `sources`.

    `folder` is `<output>/score_cache`; `run_id` names this run's parts (shared by its processes);
    `flush_s`: the longest a scored entry waits before it is written. `folder=None` keeps entries
    in memory only (scoring outside a step).
    """

    folder: str | None
    sources: Sequence[str] = ()
    ranks: Ranks = field(default_factory=Ranks)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    flush_s: float = DEFAULT_FLUSH_S
    counts: CacheCounts = field(default_factory=CacheCounts)
    _entries: dict[str, Any] = field(default_factory=dict, repr=False)
    _origin: dict[str, str] = field(default_factory=dict, repr=False)  # "resumed" / "imported" at open
    _counted: set[str] = field(default_factory=set, repr=False)
    _pending: dict[str, Any] = field(default_factory=dict, repr=False)
    _read_parts: set[str] = field(default_factory=set, repr=False)
    _parts_written: int = 0
    _last_flush: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        if self.folder is None:
            return
        storage.makedirs(self.folder)
        self._read_own()
        self._origin = dict.fromkeys(self._entries, "resumed")
        for source in self.sources:
            if source.rstrip("/") == self.folder.rstrip("/"):
                continue
            for key, value in _read_folder(source)[0].items():
                if key not in self._entries:
                    self._entries[key] = value
                    self._origin[key] = "imported"

    @property
    def writer(self) -> str:
        return f"{self.run_id}-r{self.ranks.rank}"

    def get(self, key: str) -> Any:
        """The value of `key`, or None when it is not cached."""
        return self._entries.get(key)

    def put(self, key: str, value: Any) -> None:
        """Record a freshly scored entry; it is written with the next part."""
        self._entries[key] = value
        self._pending[key] = value

    def maybe_flush(self) -> None:
        """Write a part when the oldest pending entry has waited `flush_s` seconds."""
        if self._pending and time.monotonic() - self._last_flush >= self.flush_s:
            self.flush()

    def flush(self) -> None:
        """Write every pending entry as one part (whole: see the module docstring)."""
        self._last_flush = time.monotonic()
        if not self._pending or self.folder is None:
            self._pending.clear()
            return
        name = f"part-{self.writer}-{self._parts_written:06d}.jsonl"
        self._parts_written += 1
        storage.write_atomic(storage.join(self.folder, name), _lines(self._pending))
        self._read_parts.add(name)
        self._pending.clear()

    def refresh(self) -> None:
        """Read the parts other processes wrote since this one last looked (after a barrier)."""
        if self.folder is not None:
            self._read_own()

    def compact(self) -> None:
        """When scoring is over (every process): rank 0 writes every entry of this step's own into
        `scores.jsonl`, then removes the parts it read (see the module docstring)."""
        self.flush()
        self.ranks.wait()
        if self.folder is None or self.ranks.rank != 0:
            return
        self._read_own()
        own = {
            k: v for k, v in self._entries.items() if self._origin.get(k) != "imported" or k in self._counted
        }
        storage.write_atomic(storage.join(self.folder, COMPACT_FILE), _lines(own))
        for name in sorted(self._read_parts):
            if _PART.match(name):  # only parts, by our naming, in this step's own folder
                storage.remove(storage.join(self.folder, name))
        self._read_parts.clear()
        for name in storage.list_names(self.folder):
            if _PART_TEMP.match(name):  # a killed writer's unfinished part: its entries were never read
                storage.remove(storage.join(self.folder, name))

    def _read_own(self) -> None:
        entries, names = _read_folder(self.folder, skip=self._read_parts)
        for key, value in entries.items():
            self._entries.setdefault(key, value)
        self._read_parts |= names

    def _count(self, keys: Sequence[str]) -> None:
        for key in keys:
            if key in self._counted:
                continue
            self._counted.add(key)
            origin = self._origin.get(key, "computed")
            setattr(self.counts, origin, getattr(self.counts, origin) + 1)
            if origin == "imported" and self.ranks.rank == 0:
                self._pending[key] = self._entries[key]  # this output keeps its own copy

    def score(
        self,
        keys: Sequence[str],
        order: Sequence[int],
        chunk_size: int,
        compute: Callable[[list[int]], Sequence[Any]],
    ) -> list[Any]:
        """The value of every item (`keys[i]`), scoring only those not cached.

        Items are taken in `order` and cut into chunks of `chunk_size` (over every item, cached or
        not); this process scores the uncached items of its chunks (`compute(indices)` -> their
        values, in that order), writing parts between chunks; then, with several processes, it waits
        for the others and reads what they wrote. Items that share a key are scored once.
        """
        first: dict[str, int] = {}
        for i in order:
            first.setdefault(keys[i], i)
        unique = list(first.values())
        size = max(1, chunk_size)
        chunks = [unique[s : s + size] for s in range(0, len(unique), size)]
        for number, chunk in enumerate(chunks):
            if number % self.ranks.world != self.ranks.rank:
                continue
            missing = [i for i in chunk if keys[i] not in self._entries]
            if not missing:
                continue
            values = list(compute(missing))
            for i, value in zip(missing, values, strict=True):
                self.put(keys[i], value)
            self.maybe_flush()
        self.flush()
        if self.ranks.world > 1:
            self.ranks.wait()
            self.refresh()
        self._count(list(first))
        absent = [k for k in first if k not in self._entries]
        if absent:
            raise RuntimeError(f"score cache {self.folder}: {len(absent)} item(s) were scored by no process")
        return [self._entries[k] for k in keys]


def _lines(entries: dict[str, Any]) -> bytes:
    return b"".join(orjson.dumps([k, v]) + b"\n" for k, v in entries.items())


def _read_folder(folder: str, skip: set[str] = frozenset()) -> tuple[dict[str, Any], set[str]]:
    """(entries, part names read) of a cache folder: its compacted file and every part not in `skip`."""
    try:
        names = [
            n for n in storage.list_names(folder) if (n == COMPACT_FILE or _PART.match(n)) and n not in skip
        ]
    except FileNotFoundError:
        return {}, set()
    names.sort(key=lambda n: (n != COMPACT_FILE, n))
    entries: dict[str, Any] = {}
    read: set[str] = set()
    for name, data in zip(names, storage.read_many([storage.join(folder, n) for n in names]), strict=True):
        if data is None:
            continue  # removed by a compaction meanwhile: its entries are in the compacted file
        for line in data.splitlines():
            if line:
                key, value = orjson.loads(line)
                entries.setdefault(key, value)
        if name != COMPACT_FILE:
            read.add(name)
    return entries, read


def sibling_caches(output_path: str) -> list[str]:
    """The cache folders of the other outputs of the same step (`<name>-<hash8>` beside this output):
    what earlier keys of this evaluation scored, to read only."""
    parent, base = storage.parent(output_path.rstrip("/")), storage.basename(output_path.rstrip("/"))
    stem = base.rsplit("-", 1)[0]
    pattern = re.compile(rf"^{re.escape(stem)}-[0-9a-f]{{8}}$")
    try:
        names = sorted(n for n in storage.list_names(parent) if pattern.match(n) and n != base)
    except FileNotFoundError:
        return []
    return [storage.join(parent, n, CACHE_DIR) for n in names]


def model_identity(folder: str, manifest: Sequence[dict[str, Any]] | None = None, prefix: str = "") -> str:
    """The digest of a model's files (name, size, content digest): what its scores are keyed by.

    `manifest`: the train step's recorded entries (paths under `prefix`), which spare reading the
    weights; else every file in the local `folder` is hashed (xxh3, a few GB/s).
    """
    from marin.execution.manifest import DIGEST, file_digest

    if manifest:
        rows = sorted(
            [e["path"][len(prefix) :], e["size"], e.get(DIGEST)]
            for e in manifest
            if e["path"].startswith(prefix) and "/" not in e["path"][len(prefix) :]
        )
        if rows and all(r[2] for r in rows):
            return bytes_digest(orjson.dumps(rows))
    rows = []
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if os.path.isfile(path) and not name.startswith("."):
            rows.append([name, os.path.getsize(path), file_digest(path)])
    return bytes_digest(orjson.dumps(rows))


def resume_note(output_path: str) -> str:
    """What a rerun of an interrupted evaluation starts from (the plan prints it)."""
    folder = storage.join(output_path, CACHE_DIR)
    parts = [n for n in storage.list_names(folder) if _PART.match(n) or n == COMPACT_FILE]
    if not parts:
        return "nothing scored yet"
    lines = sum(
        data.count(b"\n") for data in storage.read_many([storage.join(folder, n) for n in parts]) if data
    )
    return f"resumes with {lines} scored item(s) kept"
