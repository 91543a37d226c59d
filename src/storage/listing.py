"""Listing: the names in a directory, every file under one, directories holding records, globs."""

from __future__ import annotations

import glob as _glob
import os
from collections.abc import Callable, Iterator, Sequence

from storage.paths import basename, display, fs_and_path, is_local, local_path, protocol_of

_GLOB_CHARS = "*?["


class NoFilesMatch(FileNotFoundError):
    """No file matches the glob patterns given as input."""


def list_names(path: str) -> list[str]:
    """The names directly inside the directory `path` (empty when it does not exist)."""
    if is_local(path):
        try:
            return os.listdir(local_path(path))
        except (FileNotFoundError, NotADirectoryError):
            return []
    fs, p = fs_and_path(path)
    try:
        return [basename(entry) for entry in fs.ls(p, detail=False) if basename(entry)]
    except FileNotFoundError:
        return []


def walk_files(path: str) -> Iterator[tuple[str, int]]:
    """Yield (path relative to `path`, size in bytes) for every file under the directory `path`.

    A file removed between the listing and its stat (another thread's temporary file, renamed into
    place meanwhile: a lease renewal, an atomic write) is not there, and is left out.
    """
    if is_local(path):
        root = local_path(path)
        stack = [""]
        while stack:
            rel = stack.pop()
            try:
                entries = os.scandir(os.path.join(root, rel) if rel else root)
            except (FileNotFoundError, NotADirectoryError):
                continue
            with entries:
                for entry in entries:
                    name = f"{rel}/{entry.name}" if rel else entry.name
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(name)
                        continue
                    try:
                        size = entry.stat(follow_symlinks=False).st_size
                    except FileNotFoundError:
                        continue
                    yield name, size
        return
    for rel, size, _ in walk_file_details(path):
        yield rel, size


CHECKSUM_FIELDS = ("md5Hash", "md5", "crc32c", "ETag", "etag", "checksum")


def walk_file_details(path: str) -> Iterator[tuple[str, int, str | None]]:
    """Yield (relative path, size, checksum) for every file under `path` on a store, in one listing.

    The checksum is the first the store reports (md5, crc32c or ETag) as `field:value`, or None.
    """
    fs, p = fs_and_path(path)
    try:
        found = fs.find(p, detail=True)
    except FileNotFoundError:
        return
    base = p.rstrip("/") + "/"
    for full, info in found.items():
        if info.get("type") == "file" and full.startswith(base):
            checksum = next((f"{k}:{info[k]}" for k in CHECKSUM_FIELDS if info.get(k)), None)
            yield full[len(base) :], int(info.get("size") or 0), checksum


def find_dirs_with(root: str, wanted: Callable[[str], bool]) -> Iterator[tuple[str, list[str]]]:
    """Yield (directory, its file names) for each directory under `root` holding a file `wanted` accepts.

    Such a directory is not searched further: step outputs do not nest records. On an object store
    this is one recursive listing (paged by the store), not one call per directory.
    """
    if is_local(root):
        for dirpath, dirnames, filenames in os.walk(local_path(root)):
            if any(wanted(n) for n in filenames):
                dirnames[:] = []
                yield dirpath, filenames
        return
    fs, p = fs_and_path(root)
    protocol = protocol_of(root)
    try:
        found = fs.find(p)
    except FileNotFoundError:
        return
    by_dir: dict[str, list[str]] = {}
    base = p.rstrip("/") + "/"
    for full in found:
        if not full.startswith(base):
            continue  # `root` is a file itself (S3 and GCS find it by name), or a sibling sharing its prefix
        directory, _, name = full.rpartition("/")
        by_dir.setdefault(directory, []).append(name)
    for directory, names in sorted(by_dir.items()):
        if any(wanted(n) for n in names):
            yield f"{protocol}://{directory.lstrip('/')}", names


def glob(pattern: str) -> list[str]:
    """The sorted files (not directories) the glob `pattern` matches; a pattern without wildcards
    matches the file of that name if it exists."""
    if is_local(pattern):
        # The os-level glob: importing fsspec alone costs ~50 ms in a fresh process. Hidden files
        # match as they do in fsspec's glob.
        p = os.path.abspath(local_path(pattern))
        found = (
            _glob.glob(p, recursive=True, include_hidden=True) if any(c in p for c in _GLOB_CHARS) else [p]
        )
        return sorted(m for m in found if os.path.isfile(m))
    fs, p = fs_and_path(pattern)
    if any(c in p for c in _GLOB_CHARS):
        matches = fs.glob(p)
    else:
        matches = [p] if fs.exists(p) else []
    return sorted(display(fs, m) for m in matches if not fs.isdir(m))


def list_files(patterns: str | Sequence[str]) -> list[str]:
    """The sorted, de-duplicated files that the glob pattern(s) match; NoFilesMatch if none match."""
    if isinstance(patterns, str):
        patterns = [patterns]
    found: set[str] = set()
    for pattern in patterns:
        found.update(glob(pattern))
    if not found:
        raise NoFilesMatch(f"no input files match {list(patterns)}; check the path or glob pattern")
    return sorted(found)


def remove_matching(pattern: str) -> None:
    """Delete every file the glob matches (left-over temporary files of killed attempts)."""
    if is_local(pattern):
        for match in glob(pattern):
            os.remove(match)
        return
    fs, p = fs_and_path(pattern)
    for match in fs.glob(p):
        fs.rm(match)


def move(src: str, dst: str) -> None:
    """Move a file or directory (a rename locally; a copy then delete on object stores)."""
    if is_local(src) and is_local(dst):
        os.replace(local_path(src), local_path(dst))
        return
    fs, p = fs_and_path(src)
    _, q = fs_and_path(dst)
    files = [rel for rel, _ in walk_files(src)]
    if not files:
        fs.mv(p, q)  # a single object
        return
    # Copy the objects by name, then delete: fsspec's recursive mv also tries to copy the folder itself,
    # which S3 has no object for.
    fs.copy([f"{p}/{rel}" for rel in files], [f"{q}/{rel}" for rel in files])
    fs.rm(p, recursive=True)
