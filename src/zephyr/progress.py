"""Progress on stderr: shards done out of total per stage (a rate in shards/s), and the records read.

marin's run log (`marin.execution.progress`) is a different printer on purpose: it writes one
permanent line per step event, safe to interleave with the output of steps running beside it and
readable in a CI log, while this is a bar redrawn in place many times a second for one pipeline's
shards. Neither could serve the other's reader; they share no code because they share no job.
"""

from __future__ import annotations

import sys

from tqdm import tqdm

from zephyr.readers import ShardStats


class StageProgress:
    """A progress bar for one stage; silent when `quiet`."""

    def __init__(self, stage: int, total: int, quiet: bool):
        self.records = 0
        self._bar = None
        if not quiet:
            self._bar = tqdm(
                total=total, desc=f"zephyr stage {stage}", unit=" shards", file=sys.stderr, leave=True
            )

    def skipped(self, shards: int) -> None:
        """Shards that need no work (their output exists) count as done."""
        if self._bar is not None and shards:
            self._bar.update(shards)

    def shard_done(self, stats: ShardStats) -> None:
        self.records += stats.records_in or stats.records_out
        if self._bar is not None:
            self._bar.set_postfix_str(f"{self.records:,} records", refresh=False)
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
