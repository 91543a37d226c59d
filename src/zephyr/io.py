"""zephyr's record readers and writers, published for code that streams files without a Dataset.

This module and the `zephyr` package itself are zephyr's public surface; every other module of
zephyr (`zephyr.readers`, `zephyr.writers`, `zephyr.dataset`, the backends, ...) is private to it,
and the import-linter contracts in pyproject.toml keep other packages out of them. marin's document
readers (`marin.data.file_documents`, `marin.curation.documents`) read and write shard files through
these names, so a file is parsed, and a bad record reported, exactly as a `Dataset.from_files` would.

    pos, stats = Position(), ShardStats()
    for record in read_file(path, infer_format(path), "skip", pos, stats):
        ...                                  # pos.file / pos.line name the record on an error
"""

from zephyr.readers import (
    BAD_RECORD_POLICIES,
    LineSpan,
    Position,
    ShardStats,
    infer_format,
    line_spans,
    read_blocks,
    read_file,
)
from zephyr.writers import PartStats, WriteSpec, read_part_stats, write_shard

__all__ = [
    "BAD_RECORD_POLICIES",
    "LineSpan",
    "PartStats",
    "Position",
    "ShardStats",
    "WriteSpec",
    "infer_format",
    "line_spans",
    "read_blocks",
    "read_file",
    "read_part_stats",
    "write_shard",
]
