"""Storage for every package: one set of file operations over local disk and any fsspec URL.

Paths are URLs; a path without a protocol (or `file://`) is local disk and is served by plain `os`
calls, since fsspec costs tens of microseconds per call and a cached DAG of 10,000 steps must plan
in well under a second. Every other URL (`gs://`, `s3://`, `memory://`...) goes through fsspec,
imported only when such a path is first used. This package imports nothing from marin, zephyr or
fray, which all build on it.

- `paths`: joining and splitting URLs, local or not, the fsspec client of a URL;
- `files`: whole-file reads, writes, stat, removal, open;
- `atomic`: atomic replace and exclusive create (the store's own precondition on GCS and S3);
- `streams`: compressed reading, files that appear whole or not at all;
- `listing`: directory listings, recursive walks, globs, moves;
- `overlap`: many calls in flight at once on object stores;
- `record_log`: JSON records appended to a log, in numbered whole parts off local disk.

Nothing here is quadratic on an object store except `append_bytes`, which is for one-off notes
(a log that grows record by record is a `RecordLog`).
"""

import importlib
from typing import TYPE_CHECKING, Any

from storage.paths import (
    CONDITIONAL_CREATE,
    absolute,
    basename,
    forget_clients,
    fs_and_path,
    is_local,
    join,
    local_path,
    parent,
)

if TYPE_CHECKING:
    from storage.atomic import create_exclusive, write_atomic
    from storage.files import (
        REGULAR_FLAGS,
        NotRegularFile,
        append_bytes,
        download,
        exists,
        is_dir,
        kind_of,
        makedirs,
        modified_time,
        open_file,
        open_regular,
        open_regular_fd,
        read_bytes,
        read_range,
        read_tail,
        remove,
        remove_empty_dir,
        remove_tree,
        size,
        upload,
        write_bytes,
    )
    from storage.listing import (
        NoFilesMatch,
        find_dirs_with,
        glob,
        list_files,
        list_names,
        move,
        remove_matching,
        walk_file_details,
        walk_files,
    )
    from storage.overlap import MAX_IN_FLIGHT, overlapped, read_many, write_many
    from storage.record_log import RecordLog, holds_log, read_log_bytes, read_records
    from storage.streams import (
        atomic_write,
        compression_of,
        open_read,
        read_chunks,
        strip_compression,
        temp_pattern,
    )

# Each module is loaded on the first use of one of its names: `import marin.execution` must stay
# fast, and a process pays only for the operations it uses.
_LAZY = {
    "storage.atomic": (
        "create_exclusive",
        "write_atomic",
    ),
    "storage.files": (
        "REGULAR_FLAGS",
        "NotRegularFile",
        "append_bytes",
        "download",
        "exists",
        "is_dir",
        "kind_of",
        "makedirs",
        "modified_time",
        "open_file",
        "open_regular",
        "open_regular_fd",
        "read_bytes",
        "read_range",
        "read_tail",
        "remove",
        "remove_empty_dir",
        "remove_tree",
        "size",
        "upload",
        "write_bytes",
    ),
    "storage.listing": (
        "NoFilesMatch",
        "find_dirs_with",
        "glob",
        "list_files",
        "list_names",
        "move",
        "remove_matching",
        "walk_file_details",
        "walk_files",
    ),
    "storage.overlap": (
        "MAX_IN_FLIGHT",
        "overlapped",
        "read_many",
        "write_many",
    ),
    "storage.record_log": (
        "RecordLog",
        "holds_log",
        "read_log_bytes",
        "read_records",
    ),
    "storage.streams": (
        "atomic_write",
        "compression_of",
        "open_read",
        "read_chunks",
        "strip_compression",
        "temp_pattern",
    ),
}
_LAZY_MODULE = {name: module for module, names in _LAZY.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _LAZY_MODULE.get(name)
    if module is None:
        raise AttributeError(f"module 'storage' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "CONDITIONAL_CREATE",
    "MAX_IN_FLIGHT",
    "NoFilesMatch",
    "NotRegularFile",
    "REGULAR_FLAGS",
    "RecordLog",
    "absolute",
    "append_bytes",
    "atomic_write",
    "basename",
    "compression_of",
    "create_exclusive",
    "download",
    "exists",
    "find_dirs_with",
    "forget_clients",
    "fs_and_path",
    "glob",
    "holds_log",
    "is_dir",
    "is_local",
    "join",
    "kind_of",
    "list_files",
    "list_names",
    "local_path",
    "makedirs",
    "modified_time",
    "move",
    "open_file",
    "open_read",
    "open_regular",
    "open_regular_fd",
    "overlapped",
    "parent",
    "read_bytes",
    "read_chunks",
    "read_log_bytes",
    "read_many",
    "read_range",
    "read_records",
    "read_tail",
    "remove",
    "remove_empty_dir",
    "remove_matching",
    "remove_tree",
    "size",
    "strip_compression",
    "temp_pattern",
    "upload",
    "walk_file_details",
    "walk_files",
    "write_atomic",
    "write_bytes",
    "write_many",
]
