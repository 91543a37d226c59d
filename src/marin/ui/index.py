"""The index of step outputs under a prefix, cached by mtime.

On local disk a page load stats every directory under the prefix and lists again only those whose
mtime changed; an output's row and records are reused while its directory keeps its mtime (the
engine writes `.executor_status` and lease files by renaming into the directory, which changes
it). Off local disk (gs://, s3://) the prefix is listed with `storage.find_dirs_with` and a record
is reused while `.executor_status` keeps its mtime. Outputs with a lease file are re-read every
time: whether their holder is alive depends on the clock, not on a file.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import storage
from marin.execution.artifact import ARTIFACT_FILE, INFO_FILE, ArtifactRecord, ExecutorInfo
from marin.execution.explain import OutputStatus, is_output_record, output_status
from marin.execution.lease import is_lease_file
from marin.execution.states import OutputState
from marin.execution.status import STATUS_FILE
from marin.ui.paths import (
    RECORD_CAP,
    read_record_capped,
    read_record_checked,
    relative,
    size_of,
)

METRICS_FILE = "metrics.jsonl"
RESULTS_FILE = "results.json"
LEDGER_FILE = "ledger.json"
STATS_FILE = "stats.json"  # what a curation step counted (docs/curation.md)
FIT_FILE = "fit.json"  # a scaling fit (docs/scaling.md)
GAP_FILE = "gap.json"  # a perplexity gap (docs/evaluation.md)


@dataclass(frozen=True)
class Entry:
    """One output: its status row and its file names; its `.executor_info` is read when first asked for."""

    rel: str
    row: OutputStatus
    names: frozenset[str]
    computed_at: float

    @cached_property
    def _info_read(self) -> tuple[ExecutorInfo | None, str | None]:
        if INFO_FILE not in self.names:
            return None, None
        return read_record_checked(f"{self.row.path}/{INFO_FILE}", ExecutorInfo)

    @property
    def info(self) -> ExecutorInfo | None:
        """The output's `.executor_info` (None until it succeeds, or when unreadable or too large)."""
        return self._info_read[0]

    @property
    def info_problem(self) -> str | None:
        """Why the output's `.executor_info` could not be read (a FIFO, a symlink, too large), or None."""
        return self._info_read[1]

    @property
    def age_s(self) -> float | None:
        """The age now, not when the row was cached."""
        return None if self.row.age_s is None else self.row.age_s + (time.time() - self.computed_at)

    @property
    def key(self) -> str | None:
        """The output's cache key, from its info."""
        return self.info.key if self.info is not None else None

    @property
    def kind(self) -> str:
        """train, eval, data, fit, gap or step: what the output's files say it is."""
        if storage.holds_log(METRICS_FILE, self.names):
            return "train"
        if RESULTS_FILE in self.names:
            return "eval"
        if LEDGER_FILE in self.names:
            return "data"
        if FIT_FILE in self.names:
            return "fit"
        if GAP_FILE in self.names:
            return "gap"
        return "step"


@dataclass
class OutputIndex:
    """Every output under `prefix`; `entries()` re-walks and re-reads only what changed."""

    prefix: str
    lease_timeout: float = 60.0
    _cache: dict[str, tuple[Any, Entry]] = field(default_factory=dict)
    _dirs: dict[str, tuple[int, list[str], list[str]]] = field(default_factory=dict)
    _walking: threading.Lock = field(
        default_factory=threading.Lock
    )  # one walk at a time: later ones reuse it
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def entries(self, include_superseded: bool = True) -> list[Entry]:
        """All outputs, sorted by path."""
        with self._walking:
            now = time.time()
            walked = list(self._walk())
            # On a bucket each output's records are round trips: read many outputs at once.
            built = storage.overlapped(
                lambda w: self._entry(w[0], w[1], now, w[2]), walked, where=self.prefix
            )
            found = {w[0]: entry for w, entry in zip(walked, built, strict=True)}
        with self._lock:
            for gone in self._cache.keys() - found.keys():
                del self._cache[gone]
        return [found[p] for p in sorted(found) if include_superseded or not found[p].row.superseded]

    def _walk(self) -> Iterator[tuple[str, list[str], Any]]:
        """(output directory, its file names, a stamp that changes when it does) for every output."""
        if not storage.is_local(self.prefix):
            for path, names in storage.find_dirs_with(self.prefix, is_output_record):
                yield path, names, None
            return
        seen: dict[str, tuple[int, list[str], list[str]]] = {}
        stack = [storage.absolute(self.prefix)]
        while stack:
            directory = stack.pop()
            try:
                mtime = os.stat(directory).st_mtime_ns
            except OSError:
                continue
            with self._lock:
                listed = self._dirs.get(directory)
            if listed is None or listed[0] != mtime:
                subdirs, files = [], []
                try:
                    with os.scandir(directory) as it:
                        for e in it:
                            (subdirs if e.is_dir(follow_symlinks=False) else files).append(e.name)
                except OSError:
                    continue
                listed = (mtime, sorted(subdirs), files)
            seen[directory] = listed
            if any(is_output_record(n) for n in listed[2]):
                yield directory, listed[2], mtime
            else:
                stack.extend(os.path.join(directory, d) for d in reversed(listed[1]))
        with self._lock:
            self._dirs = seen

    def _entry(self, path: str, names: list[str], now: float, stamp: Any = None) -> Entry:
        leased = any(is_lease_file(n) for n in names)
        if leased:
            stamp = None
        elif stamp is None:
            stamp = (storage.modified_time(f"{path}/{STATUS_FILE}"), INFO_FILE in names)
        with self._lock:
            cached = self._cache.get(path)
        if stamp is not None and cached is not None and cached[0] == stamp:
            return cached[1]
        oversized = [
            n
            for n in (STATUS_FILE, ARTIFACT_FILE)
            if n in names and (size_of(f"{path}/{n}") or 0) > RECORD_CAP
        ]
        if oversized:  # the engine's readers take whole files: never hand them one this large
            row = OutputStatus(
                path,
                storage.basename(path),
                OutputState.UNREADABLE,
                None,
                None,
                f"{', '.join(oversized)} is larger than {RECORD_CAP >> 20} MiB; not read",
            )
        else:
            row = output_status(path, names, now, self.lease_timeout)
        entry = Entry(relative(self.prefix, path) or storage.basename(path), row, frozenset(names), now)
        with self._lock:
            self._cache[path] = (stamp, entry)
        return entry

    def get(self, path: str) -> Entry | None:
        """The entry of the output at `path`, or None when it is not an output."""
        names = storage.list_names(path)
        if not any(is_output_record(n) for n in names):
            return None
        return self._entry(path, names, time.time(), self._stamp(path, names))

    def _stamp(self, path: str, names: list[str]) -> Any:
        if storage.is_local(path):
            try:
                return os.stat(storage.absolute(path)).st_mtime_ns
            except OSError:
                return None
        return None


def artifact_of(path: str) -> ArtifactRecord | None:
    """The `.artifact.json` of an output (size-capped; None when missing or unreadable)."""
    return read_record_capped(f"{path}/{ARTIFACT_FILE}", ArtifactRecord)


def artifact_checked(path: str) -> tuple[ArtifactRecord | None, str | None]:
    """The `.artifact.json` of an output and why it could not be read (see `read_record_checked`)."""
    return read_record_checked(f"{path}/{ARTIFACT_FILE}", ArtifactRecord)


def with_age(entry: Entry) -> OutputStatus:
    """The entry's row with its age brought up to now."""
    return replace(entry.row, age_s=entry.age_s)
