"""Storage for every package: one set of file operations over local disk and any fsspec URL.

Paths are URLs; a path without a protocol (or `file://`) is local disk and is served by plain `os`
calls, since fsspec costs tens of microseconds per call and a cached DAG of 10,000 steps must plan
in well under a second. Every other URL (`gs://`, `s3://`, `memory://`...) goes through fsspec,
imported only when such a path is first used. This package imports nothing from marin, zephyr or
fray, which all build on it. Its modules load only light parts of the standard library (about a
millisecond together; shutil, which loads the compression modules, is imported where it is used), so
every name is imported here at once and listed only here.

- `paths`: joining and splitting URLs, local or not, the fsspec client of a URL;
- `files`: whole-file reads, writes, stat, removal, open;
- `atomic`: atomic replace and exclusive create (the store's own precondition on GCS and S3);
- `streams`: compressed reading and writing (`open_read`, `open_write`: a file that appears whole or not at all);
- `listing`: directory listings, recursive walks, globs, moves;
- `overlap`: many calls in flight at once on object stores;
- `ranges`: many byte ranges of many files, coalesced per file and read at once;
- `record_log`: JSON records appended to a log, in numbered whole parts off local disk.

Nothing here is quadratic on an object store except `append_bytes`, which is for one-off notes
(a log that grows record by record is a `RecordLog`).
"""

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
from storage.ranges import read_ranges
from storage.record_log import RecordLog, holds_log, read_log_bytes, read_records
from storage.streams import (
    compression_of,
    open_read,
    open_write,
    read_chunks,
    strip_compression,
    temp_pattern,
)
