"""The manifest of an output: every file's size and xxhash, and re-checking it (`marin verify`).

The digest is xxh3-128 of the file's bytes (hex), streamed in 4 MiB blocks: fast enough to hash a
checkpoint at the end of a step, and not cryptographic (it detects corruption, not tampering).
Engine records (`.executor_*`, `.artifact.json`) are not in the manifest: they change after it is
written (the status, the log) or hold it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import msgspec

import storage

DIGEST = "xxh3_128"
_BLOCK = 4 << 20


def bytes_digest(data: bytes) -> str:
    """The xxh3-128 hex digest of `data` (what `file_digest` gives for a file holding it)."""
    import xxhash

    return xxhash.xxh3_128_hexdigest(data)


def file_digest(path: str) -> str:
    """The xxh3-128 hex digest of the bytes of the file at `path` (local or any fsspec URL)."""
    import xxhash  # lazy: marin.execution stays fast to import

    h = xxhash.xxh3_128()
    with storage.open_file(storage.absolute(path), "rb") as f:
        while block := f.read(_BLOCK):
            h.update(block)
    return h.hexdigest()


def build_manifest(
    directory: str,
    keep: Callable[[str], bool] = lambda rel: True,
    entries: Iterable[tuple[str, int]] | None = None,
) -> list[dict[str, Any]]:
    """Every file under `directory` that `keep(relative path)` accepts: path, size and digest, sorted.

    `entries`: the directory's (relative path, size) pairs as `storage.walk_files` just listed them
    (the caller needed the listing too), else it is listed here."""
    files = [
        {"path": rel, "size": size, DIGEST: file_digest(storage.join(directory, rel))}
        for rel, size in (storage.walk_files(directory) if entries is None else entries)
        if keep(rel)
    ]
    files.sort(key=lambda f: f["path"])
    return files


class ManifestCheck(msgspec.Struct, frozen=True):
    """How the files under a directory compare with its manifest."""

    checked: int
    changed: list[str] = msgspec.field(default_factory=list)  # "path: why"
    missing: list[str] = msgspec.field(default_factory=list)
    added: list[str] = msgspec.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.changed or self.missing or self.added)

    def lines(self) -> list[str]:
        """One line per difference: `changed PATH: why`, `missing PATH`, `added PATH`."""
        return (
            [f"changed {c}" for c in self.changed]
            + [f"missing {m}" for m in self.missing]
            + [f"added   {a}" for a in self.added]
        )


def check_manifest(
    directory: str, recorded: Iterable[dict[str, Any]], keep: Callable[[str], bool] = lambda rel: True
) -> ManifestCheck:
    """Compare the files under `directory` (those `keep` accepts) with a recorded manifest.

    A file is changed when its size or digest differs (an entry without a digest is checked by size
    only); missing when recorded but absent; added when present but not recorded.
    """
    expected = {f["path"]: f for f in recorded}
    present = {rel: size for rel, size in storage.walk_files(directory) if keep(rel)}
    changed, checked = [], 0
    for rel in sorted(expected.keys() & present.keys()):
        entry, size = expected[rel], present[rel]
        checked += 1
        if entry.get("size") != size:
            changed.append(f"{rel}: size {entry.get('size')} -> {size}")
        elif entry.get(DIGEST) is not None:
            digest = file_digest(storage.join(directory, rel))
            if digest != entry[DIGEST]:
                changed.append(f"{rel}: {DIGEST} {entry[DIGEST][:16]} -> {digest[:16]}")
    return ManifestCheck(
        checked, changed, sorted(expected.keys() - present.keys()), sorted(present.keys() - expected.keys())
    )
