"""The Backend interface and the retry loop every backend shares."""

from __future__ import annotations

import abc
import logging
from collections import deque

import cloudpickle

from zephyr.errors import ShardFailedError
from zephyr.progress import StageProgress
from zephyr.worker import ShardResult, ShardTask

logger = logging.getLogger("zephyr")


class Backend(abc.ABC):
    """Runs pickled shard tasks and hands back their results as they finish."""

    @abc.abstractmethod
    def free_slots(self) -> int:
        """How many more tasks may be submitted now."""

    @abc.abstractmethod
    def submit(self, task_id: int, payload: bytes) -> None:
        """Start running a cloudpickled ShardTask."""

    @abc.abstractmethod
    def wait(self) -> list[tuple[int, ShardResult]]:
        """Block until at least one submitted task finishes; return (task_id, result) pairs.

        A task whose worker died yields a result with a retryable failure rather than an exception.
        """

    def close(self) -> None:  # noqa: B027 (a backend without workers has nothing to stop)
        """Stop workers and cancel whatever still runs."""


def run_stage(
    backend: Backend, tasks: list[ShardTask], max_retries: int, progress: StageProgress
) -> list[ShardResult]:
    """Run every task, re-running failed attempts up to `max_retries` times; results in task order.

    A task that still fails (or fails in a way retrying cannot fix, such as a malformed record
    under bad_records='fail') raises ShardFailedError naming the shard, file, line and exception.
    """
    payloads = [cloudpickle.dumps(task) for task in tasks]
    pending = deque(range(len(tasks)))
    attempts = [0] * len(tasks)
    results: list[ShardResult | None] = [None] * len(tasks)
    in_flight = 0
    while pending or in_flight:
        while pending and backend.free_slots() > 0:
            i = pending.popleft()
            attempts[i] += 1
            backend.submit(i, payloads[i])
            in_flight += 1
        for i, result in backend.wait():
            in_flight -= 1
            failure = result.failure
            if failure is None:
                results[i] = result
                progress.shard_done(result.stats)
                continue
            task = tasks[i]
            if failure.retryable and attempts[i] <= max_retries:
                logger.warning(
                    "zephyr: stage %d shard %d attempt %d failed (%s: %s); retrying",
                    task.stage,
                    task.shard,
                    attempts[i],
                    failure.error_type,
                    failure.message.partition("\n")[0],
                )
                pending.append(i)
                continue
            raise ShardFailedError(
                stage=task.stage,
                shard=task.shard,
                num_shards=task.num_shards,
                file=failure.file or (task.input.paths[0] if task.input.paths else None),
                line=failure.line,
                error_type=failure.error_type,
                message=failure.message,
                attempts=attempts[i],
                traceback=failure.traceback,
                expected=failure.expected,
            )
    return results  # type: ignore[return-value]
