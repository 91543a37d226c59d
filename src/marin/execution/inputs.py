"""Declared inputs: the external files a step reads are part of its key (drift detection).

`StepSpec(inputs=("data/raw/*.jsonl", "gs://bucket/x.parquet", "hf://datasets/org/name@rev"))`:
- a local path or glob (relative to the current directory): each matched file's name, size and
  xxh3-128 digest of its bytes;
- an fsspec URL or glob: each matched object's name, size and the checksum the store reports in
  `info` (md5, crc32c or etag); a store that reports none (memory://) has its bytes hashed;
- a FIFO or device: only its kind (its bytes cannot be read ahead of the step);
- `hf://datasets/ORG/NAME@REVISION`: the pinned revision. Without `@REVISION` the source is
  unpinned: nothing is listed (planning never uses the network) and the plan marks it
  `unpinned: ORG/NAME`.

A file's name in the record is relative to the pattern's fixed directory, led by that directory's
own name (`data/raw/*.jsonl` matches `raw/a.jsonl`), so moving the data elsewhere keeps the key.

Local digests are cached in `{prefix}/.marin-input-stats.json` by (size, mtime_ns, inode,
ctime_ns), as git's index does: an unchanged file costs one stat. A stat that differs always
re-hashes, and a file modified (or its inode changed) within `RACY_NS` of its hashing is not
cached (it could change again within the same timestamp tick, leaving its stat as it was), so the
cache is never a correctness risk.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
import stat
import time
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

import storage
from marin.execution.errors import StepDefinitionError
from marin.execution.manifest import bytes_digest, file_digest
from marin.execution.records import read_record_json

STAT_CACHE = ".marin-input-stats.json"
MAX_CACHED_FILES = 200_000  # past this, a save keeps only the files this plan saw
RACY_NS = 100_000_000  # far above a kernel timestamp tick (1-10 ms)
COARSE_RACY_NS = 2_000_000_000  # timestamps in whole milliseconds or coarser (FAT, some network mounts)
HUB_PREFIX = "hf://datasets/"
_MAGIC = ("*", "?", "[")
_CHECKSUM_FIELDS = ("md5Hash", "md5", "crc32c", "ETag", "etag", "checksum")


def check_inputs(step: str, inputs: Any) -> tuple[str, ...]:
    """The declared input patterns as a tuple; StepDefinitionError naming the step when malformed."""
    if isinstance(inputs, str):
        raise StepDefinitionError(
            f"step {step!r}: inputs= takes a list of paths or globs, got the string {inputs!r}; wrap it in a list"
        )
    out = tuple(inputs)
    for p in out:
        if not isinstance(p, str) or not p.strip():
            raise StepDefinitionError(
                f"step {step!r}: every input must be a non-empty path or glob, got {p!r}"
            )
        if p.startswith(HUB_PREFIX) and len(p[len(HUB_PREFIX) :].split("@", 1)[0].strip("/").split("/")) != 2:
            raise StepDefinitionError(
                f"step {step!r}: input {p!r} must look like hf://datasets/ORG/NAME[@REVISION]"
            )
    return out


def hub_input(dataset: str, revision: str | None) -> str:
    """The input pattern that declares a Hugging Face hub dataset, pinned when `revision` is given."""
    return f"{HUB_PREFIX}{dataset}" + (f"@{revision}" if revision else "")


class InputScanner:
    """Builds the `inputs` part of key records during one plan, with the stat cache of one prefix."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self._cache: dict[str, list] | None = None
        self._dirty = False
        self._seen: set[str] = set()

    def record(self, step: str, patterns: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
        """({"files": {name: {"size", "digest"}}, "hub": {dataset: revision}}, plan notes) for one step."""
        files: dict[str, dict[str, Any]] = {}
        hub: dict[str, str | None] = {}
        notes: list[str] = []
        for i, pattern in enumerate(patterns):
            if pattern.startswith(HUB_PREFIX):
                dataset, _, revision = pattern[len(HUB_PREFIX) :].partition("@")
                dataset = dataset.strip("/")
                hub[dataset] = revision or None
                if not revision:
                    notes.append(f"unpinned: {dataset}")
                continue
            found = self._local(pattern) if storage.is_local(pattern) else self._remote(pattern)
            if not found:
                raise StepDefinitionError(
                    f"step {step!r}: input {pattern!r} matches no file; fix the path or glob, or create the data first"
                )
            for name, entry in found.items():
                if name in files and files[name] != entry:
                    name = f"#{i}:{name}"  # two patterns whose files share a relative name
                files[name] = entry
        record: dict[str, Any] = {"files": files}  # canonical JSON sorts the names
        if hub:
            record["hub"] = hub
        return record, notes

    def save(self) -> None:
        """Write the stat cache back (atomically) when this plan hashed anything."""
        if not self._dirty or self._cache is None:
            return
        if len(self._cache) > MAX_CACHED_FILES:
            self._cache = {f: e for f, e in self._cache.items() if f in self._seen}
        try:
            if not storage.exists(self.prefix):
                return  # a plan creates nothing; the plan after the first run writes it
            storage.write_atomic(
                f"{self.prefix}/{STAT_CACHE}", orjson.dumps({"version": 1, "files": self._cache})
            )
        except OSError:
            pass  # a cache that cannot be written only costs a re-hash next time
        self._dirty = False

    def _stat_cache(self) -> dict[str, list]:
        if self._cache is None:
            path = f"{self.prefix}/{STAT_CACHE}"
            stamp = _local_stamp(path)
            known = _loaded_caches.get(path)
            if stamp is not None and known is not None and known[0] == stamp:
                self._cache = known[1]  # parsed by an earlier plan of this process; the file is unchanged
            else:
                data = read_record_json(path)
                files = data.get("files") if isinstance(data, dict) and data.get("version") == 1 else None
                self._cache = files if isinstance(files, dict) else {}
                if stamp is not None:
                    _loaded_caches[path] = (stamp, self._cache)
        return self._cache

    def _local(self, pattern: str) -> dict[str, dict[str, Any]]:
        path = os.path.abspath(os.path.expanduser(pattern.removeprefix("file://")))
        base = _fixed_dir(path)
        lead = base.rstrip("/").rsplit("/", 1)[-1]
        cut = len(base.rstrip("/")) + 1
        cache = self._stat_cache()
        seen = self._seen
        out: dict[str, dict[str, Any]] = {}
        for f, st in _matches(path):
            name = f"{lead}/{f[cut:]}" if lead else f[cut:]
            if stat.S_ISDIR(st.st_mode):
                continue
            if not stat.S_ISREG(
                st.st_mode
            ):  # a FIFO or device: its bytes cannot be read ahead, only its kind
                out[name] = {"size": 0, "digest": _special_kind(st.st_mode)}
                continue
            stamp = [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns]
            cached = cache.get(f)
            if cached is not None and cached[:4] == stamp:
                digest = cached[4]
            else:
                started = time.time_ns()
                digest = "xxh3_128:" + file_digest(f)
                coarse = st.st_mtime_ns % 1_000_000 == 0 and st.st_ctime_ns % 1_000_000 == 0
                window = COARSE_RACY_NS if coarse else RACY_NS
                if started - st.st_mtime_ns > window and started - st.st_ctime_ns > window:
                    cache[f] = stamp + [digest]
                elif f in cache:
                    del cache[f]
                self._dirty = True
            seen.add(f)
            out[name] = {"size": st.st_size, "digest": digest}
        return out

    def _remote(self, pattern: str) -> dict[str, dict[str, Any]]:
        fs, path = storage.fs_and_path(pattern)
        base = _fixed_dir(path)
        if any(m in path for m in _MAGIC):
            infos = fs.glob(path, detail=True)
        else:
            try:
                infos = {path: fs.info(path)}
            except FileNotFoundError:
                infos = {}
        out: dict[str, dict[str, Any]] = {}
        for name, info in infos.items():
            if info.get("type") == "directory":
                continue
            digest = next((f"{k}:{info[k]}" for k in _CHECKSUM_FIELDS if info.get(k)), None)
            if digest is None:
                digest = "xxh3_128:" + bytes_digest(fs.cat_file(name))
            out[_relative_name(name, base)] = {"size": int(info.get("size") or 0), "digest": digest}
        return out


_loaded_caches: dict[str, tuple[tuple[int, int, int], dict[str, list]]] = {}


def _local_stamp(path: str) -> tuple[int, int, int] | None:
    if not storage.is_local(path):
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


def _matches(path: str):
    """(file, stat) for each path a local pattern matches. `DIR/*.ext` (one wildcard segment, the
    last) is one scandir of DIR; other globs go through glob.glob."""
    magic = any(m in path for m in _MAGIC)
    if not magic:
        try:
            yield path, os.stat(path)
        except FileNotFoundError:
            pass
        return
    directory, _, last = path.rpartition("/")
    if any(m in directory for m in _MAGIC) or "**" in last:
        for f in glob.glob(path, recursive=True):
            try:
                yield f, os.stat(f)
            except FileNotFoundError:
                continue
        return
    match = re.compile(fnmatch.translate(last)).match
    try:
        entries = list(os.scandir(directory or "/"))
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        name = entry.name
        if name.startswith(".") and not last.startswith("."):  # glob's rule: * does not match hidden files
            continue
        if match(name):
            try:
                yield entry.path, entry.stat()
            except FileNotFoundError:
                continue


def _special_kind(mode: int) -> str:
    return "fifo" if stat.S_ISFIFO(mode) else "socket" if stat.S_ISSOCK(mode) else "device"


def _fixed_dir(path: str) -> str:
    """The directory before the first glob segment (for a plain file: its directory)."""
    parts = path.split("/")
    fixed = []
    for part in parts[:-1]:
        if any(m in part for m in _MAGIC):
            break
        fixed.append(part)
    return "/".join(fixed)


def _relative_name(path: str, base: str) -> str:
    rest = path[len(base) :].lstrip("/") if path.startswith(base) else path
    lead = base.rstrip("/").rsplit("/", 1)[-1]
    return f"{lead}/{rest}" if lead else rest


def diff_inputs(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """Each drifted input as (name, what happened): 'changed (size 1200 -> 1500)', 'added', 'removed'."""
    old_files = (old or {}).get("files", {})
    new_files = (new or {}).get("files", {})
    out: list[tuple[str, str]] = []
    for name in sorted(old_files.keys() | new_files.keys()):
        a, b = old_files.get(name), new_files.get(name)
        if a == b:
            continue
        if a is None:
            out.append((name, "added"))
        elif b is None:
            out.append((name, "removed"))
        elif a.get("size") != b.get("size"):
            out.append((name, f"changed (size {a.get('size')} -> {b.get('size')})"))
        else:
            out.append((name, "changed (same size, new content)"))
    old_hub, new_hub = (old or {}).get("hub", {}), (new or {}).get("hub", {})
    for dataset in sorted(old_hub.keys() | new_hub.keys()):
        if old_hub.get(dataset, "-") != new_hub.get(dataset, "-"):
            what = (
                "added"
                if dataset not in old_hub
                else "removed"
                if dataset not in new_hub
                else f"revision {old_hub[dataset] or 'unpinned'} -> {new_hub[dataset] or 'unpinned'}"
            )
            out.append((f"hf:{dataset}", what))
    return out
