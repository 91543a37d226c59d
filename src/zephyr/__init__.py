"""zephyr: lazy, streaming, sharded dataset processing on a laptop or a Ray cluster.

    from zephyr import Dataset
    Dataset.from_files("raw/*.jsonl.gz").map(clean).filter(keep).write_jsonl("out/", compression="zstd")

Nothing runs until a writer, `collect()`, `take()` or `count()`; `explain()` prints the plan.
"""

from zephyr.config import ZephyrConfig
from zephyr.dataset import Dataset
from zephyr.errors import BadRecordError, PlanError, ShardFailedError, UnsupportedKeyError, ZephyrError
from zephyr.execute import WriteResult
from zephyr.ops import ShardInfo

__all__ = [
    "BadRecordError",
    "Dataset",
    "PlanError",
    "ShardFailedError",
    "ShardInfo",
    "UnsupportedKeyError",
    "WriteResult",
    "ZephyrConfig",
    "ZephyrError",
]
