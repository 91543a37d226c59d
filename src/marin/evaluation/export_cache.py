"""A local cache of model exports that live on an object store, keyed by their contents.

Hugging Face and lm-eval-harness load local folders only, so an export at `s3://...` or `gs://...`
is brought to local disk first. The cache folder is `$MARIN_EXPORT_CACHE`, else
`~/.cache/marin/exports`, bounded to `$MARIN_EXPORT_CACHE_GB` gigabytes (default 50).

The invariant, and the order of writes that keeps it:
1. An entry is `<root>/<digest>/` holding the export's files and, written last, `ENTRY_RECORD`,
   which lists every file the cache wrote there (name and size). A folder without the record is
   not an entry: the cache never reads it as one and never deletes from it.
2. `digest` is the xxh3-128 of the export's file list: each file's name, size and content digest
   from the train step's `.artifact.json` manifest (so an export is fetched once, whichever step,
   run or prefix wants it), else, for a folder no step wrote, the checksums its store reports.
   The intermediate exports a train step keeps inside its `hf/` (`hf/step-NNNNNNNN/`) are not part
   of the final export's files; each is fetched as an export of its own.
3. A fetch lists the export once, reads every file at once (one read per file) into a private
   `<root>/.partial-<digest>-<id>/` folder whose `PARTIAL_RECORD` lists, before any download,
   the files it will hold; each file is checked against the manifest's size and digest; then the
   entry record is written and the folder renamed to `<root>/<digest>` in one step. A reader
   therefore sees a whole entry or none. If another process renamed first, ours is removed.
4. Eviction removes whole entries, least recently used first, until the cache fits its bound, but
   never the entry just used nor one used in the last `IN_USE_S` seconds (another process may be
   loading it). Removing an entry deletes the record's files, then the record, then the folder if
   it is left empty: a file the cache did not write stays, and so does its folder. A partial folder
   older than a day (a fetch that died) goes the same way, by its partial record.
"""

from __future__ import annotations

import logging
import os
import re
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

import storage
from marin.evaluation.errors import CheckpointNotReadyError
from marin.execution.manifest import DIGEST, bytes_digest, file_digest

logger = logging.getLogger(__name__)

ENTRY_RECORD = ".marin-export-cache.json"
PARTIAL_RECORD = ".marin-export-partial.json"
PARTIAL_PREFIX = ".partial-"
IN_USE_S = 3600.0
STALE_PARTIAL_S = 86400.0
DEFAULT_BOUND_GB = 50.0
_NESTED_EXPORT = re.compile(r"^step-\d{8}/")  # a train step's intermediate exports inside its hf/


def cache_root() -> str:
    """The cache folder: `$MARIN_EXPORT_CACHE`, else `~/.cache/marin/exports`."""
    return os.path.abspath(
        os.path.expanduser(os.environ.get("MARIN_EXPORT_CACHE") or "~/.cache/marin/exports")
    )


def cache_bound_bytes() -> int:
    """The size bound: `$MARIN_EXPORT_CACHE_GB` gigabytes, else 50."""
    return int(float(os.environ.get("MARIN_EXPORT_CACHE_GB") or DEFAULT_BOUND_GB) * 1e9)


@dataclass(frozen=True)
class RemoteFile:
    """One file of an export on a store: its path in the folder, size, and digest to check (or None)."""

    name: str
    size: int
    digest: str | None


def export_digest(files: Sequence[RemoteFile], checksums: dict[str, str | None] | None = None) -> str:
    """The cache key of an export: xxh3-128 of its files' names, sizes and digests (or store checksums)."""
    rows = [
        [f.name, f.size, f.digest if f.digest is not None else (checksums or {}).get(f.name)] for f in files
    ]
    return bytes_digest(orjson.dumps(rows))


def fetch(url: str, manifest: Sequence[dict[str, Any]] | None = None, prefix_in_manifest: str = "hf/") -> str:
    """A local folder holding the export at `url`: a cached entry, or one fetched now (see the module docstring)."""
    listed = {
        name: (size, checksum)
        for name, size, checksum in storage.walk_file_details(url)
        if not _NESTED_EXPORT.match(name)
    }
    files = _checked(url, listed, manifest, prefix_in_manifest)
    digest = export_digest(files, {name: checksum for name, (_, checksum) in listed.items()})
    root = cache_root()
    entry = os.path.join(root, digest)
    if _valid_entry(entry, files):
        _touch(entry)
        return entry
    os.makedirs(root, exist_ok=True)
    partial = os.path.join(root, f"{PARTIAL_PREFIX}{digest}-{uuid.uuid4().hex[:8]}")
    os.makedirs(partial)
    _write_json(
        os.path.join(partial, PARTIAL_RECORD),
        {"files": {f.name: f.size for f in files}, "created": time.time()},
    )
    try:
        storage.overlapped(lambda f: _download(url, partial, f), files)
        _write_json(
            os.path.join(partial, ENTRY_RECORD),
            {
                "digest": digest,
                "source": url,
                "files": {f.name: f.size for f in files},
                "last_used": time.time(),
            },
        )
        os.remove(os.path.join(partial, PARTIAL_RECORD))
        try:
            os.rename(partial, entry)
        except OSError:
            if not _valid_entry(entry, files):
                raise
            _remove_owned(partial, {f.name for f in files} | {ENTRY_RECORD})  # another fetch won the race
    except BaseException:
        _remove_owned(partial, {f.name for f in files} | {ENTRY_RECORD, PARTIAL_RECORD})
        raise
    evict(keep=digest)
    return entry


def _checked(
    url: str,
    listed: dict[str, tuple[int, str | None]],
    manifest: Sequence[dict[str, Any]] | None,
    prefix: str,
) -> list[RemoteFile]:
    if not listed:
        raise CheckpointNotReadyError(f"no files at {url}: the model export is missing")
    if manifest is None:
        return [RemoteFile(name, size, None) for name, (size, _) in sorted(listed.items())]
    recorded = {
        e["path"][len(prefix) :]: e
        for e in manifest
        if e["path"].startswith(prefix) and not _NESTED_EXPORT.match(e["path"][len(prefix) :])
    }
    differ = sorted(
        name
        for name in recorded.keys() | listed.keys()
        if name not in recorded or name not in listed or recorded[name].get("size") != listed[name][0]
    )
    if differ:
        raise CheckpointNotReadyError(
            f"the export at {url} is not what its step recorded in .artifact.json: {', '.join(differ[:5])} "
            "differ (added, missing or resized); rerun the train step"
        )
    return [RemoteFile(name, int(e["size"]), e.get(DIGEST)) for name, e in sorted(recorded.items())]


def _download(url: str, folder: str, f: RemoteFile) -> None:
    local = os.path.join(folder, f.name)
    os.makedirs(os.path.dirname(local), exist_ok=True)
    if not storage.download(storage.join(url, f.name), local):
        raise CheckpointNotReadyError(f"{storage.join(url, f.name)} vanished while it was being fetched")
    size = os.path.getsize(local)
    if size != f.size or (f.digest is not None and file_digest(local) != f.digest):
        raise CheckpointNotReadyError(
            f"{storage.join(url, f.name)} does not match its step's manifest (size {size}, recorded {f.size}, "
            "or a different digest): the export changed after its step finished; rerun the train step"
        )


def _valid_entry(entry: str, files: Sequence[RemoteFile]) -> bool:
    record = _read_json(os.path.join(entry, ENTRY_RECORD))
    if not isinstance(record, dict) or record.get("files") != {f.name: f.size for f in files}:
        return False
    return all(_size(os.path.join(entry, f.name)) == f.size for f in files)


def _touch(entry: str) -> None:
    path = os.path.join(entry, ENTRY_RECORD)
    record = _read_json(path)
    if isinstance(record, dict):
        record["last_used"] = time.time()
        _write_json(path, record)


def evict(keep: str | None = None, bound: int | None = None) -> list[str]:
    """Remove least recently used entries until the cache fits `bound` bytes; return the digests removed.

    Only entries (folders with the cache's record) count and are removed, never `keep` nor one used in
    the last `IN_USE_S` seconds; stale partial fetches are removed too. See the module docstring.
    """
    root = cache_root()
    bound = cache_bound_bytes() if bound is None else bound
    now = time.time()
    entries = []
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return []
    for name in names:
        folder = os.path.join(root, name)
        if name.startswith(PARTIAL_PREFIX):
            record = _read_json(os.path.join(folder, PARTIAL_RECORD))
            if isinstance(record, dict) and now - float(record.get("created", now)) > STALE_PARTIAL_S:
                _remove_owned(folder, set(record.get("files", {})) | {ENTRY_RECORD, PARTIAL_RECORD})
            continue
        record = _read_json(os.path.join(folder, ENTRY_RECORD))
        if isinstance(record, dict) and isinstance(record.get("files"), dict):
            entries.append((float(record.get("last_used", 0)), name, record["files"]))
    total = sum(sum(files.values()) for _, _, files in entries)
    removed = []
    for last_used, name, files in sorted(entries):
        if total <= bound:
            break
        if name == keep or now - last_used < IN_USE_S:
            continue
        _remove_owned(os.path.join(root, name), set(files) | {ENTRY_RECORD})
        total -= sum(files.values())
        removed.append(name)
        logger.info(
            "export cache: evicted %s (%d bytes) to stay under %d bytes", name, sum(files.values()), bound
        )
    return removed


def _remove_owned(folder: str, names: set[str]) -> None:
    """Delete the files `names` (the cache wrote them) under `folder`, then the folders they leave empty."""
    # The record goes last among the files, so a folder whose removal stops midway is still recognised.
    for name in sorted(names - {ENTRY_RECORD, PARTIAL_RECORD}) + [ENTRY_RECORD, PARTIAL_RECORD]:
        path = os.path.join(folder, name)
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
    dirs = {os.path.dirname(os.path.join(folder, n)) for n in names}
    for d in sorted(dirs, key=len, reverse=True):
        while d.startswith(folder) and d != os.path.dirname(folder):
            try:
                os.rmdir(d)  # only an empty folder: anything another tool left there keeps it
            except OSError:
                break
            d = os.path.dirname(d)


def _size(path: str) -> int | None:
    try:
        return os.path.getsize(path)
    except OSError:
        return None


def _read_json(path: str) -> Any:
    try:
        with open(path, "rb") as f:
            return orjson.loads(f.read())
    except (OSError, orjson.JSONDecodeError):
        return None


def _write_json(path: str, data: dict) -> None:
    storage.write_atomic(path, orjson.dumps(data))
