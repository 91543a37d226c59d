"""Exception types zephyr raises on purpose. Each message names the shard, file and line involved.

zephyr is a leaf library (it imports neither marin nor fray), so `ZephyrError` has its own base; marin
code that reports its own errors cleanly (the `marin` command) catches `ZephyrError` beside `MarinError`.
"""

from __future__ import annotations

from functools import partial


class ZephyrError(Exception):
    """Base class of every error zephyr raises on purpose."""


class PlanError(ZephyrError, ValueError):
    """A pipeline is declared wrongly: a bad argument, format, path or option."""


class UnsupportedKeyError(PlanError):
    """A group_by/deduplicate key is of a type zephyr cannot encode canonically across processes."""

    def __init__(self, key_type: type, op: str | None = None):
        self.key_type, self.op = key_type, op
        where = f"{op}: " if op else ""
        super().__init__(
            f"{where}shuffle keys of type {key_type.__module__}.{key_type.__qualname__} are not supported; "
            "return a str, bytes, None, a number (int, bool, float, Decimal, Fraction, numpy scalar), a "
            "datetime/date/time/timedelta, or a tuple/list/dict/set/frozenset of those"
        )

    def __reduce__(self):  # args hold the message, not the constructor's arguments
        return type(self), (self.key_type, self.op)


class BadRecordError(ZephyrError):
    """An input record could not be parsed and the reader's policy is ``bad_records="fail"``."""

    def __init__(self, file: str, line: int, reason: str):
        self.file, self.line, self.reason = file, line, reason
        super().__init__(
            f"malformed record at {file}:{line}: {reason}; fix the input, or read it with "
            "bad_records='skip' to drop and count such lines"
        )

    def __reduce__(self):
        return type(self), (self.file, self.line, self.reason)


class ShardFailedError(ZephyrError):
    """A shard task kept failing after its retries; names the stage, shard, file, line and exception.

    Its message is one line. When the shard's error was itself a ZephyrError (`expected`: a malformed
    record, a plan error), whose message already names the file and line, that message leads;
    otherwise the exception's type and message, then the record it was at. The worker's traceback
    is a note (printed with the exception's traceback, not part of its message).
    """

    def __init__(
        self,
        *,
        stage: int,
        shard: int,
        num_shards: int,
        file: str | None,
        line: int | None,
        error_type: str,
        message: str,
        attempts: int,
        traceback: str = "",
        expected: bool = False,
    ):
        self.stage, self.shard, self.num_shards = stage, shard, num_shards
        self.file, self.line = file, line
        self.error_type, self.error_message = error_type, message
        self.attempts, self.traceback, self.expected = attempts, traceback, expected
        where = (
            f"{file}:{line}"
            if file is not None and line is not None
            else (file or "(before the first record)")
        )
        shard_text = f"zephyr stage {stage}, shard {shard} of {num_shards}, after {attempts} attempt(s)"
        first = message.partition("\n")[0]
        if expected and first:
            text = f"{first} ({shard_text})"
        else:
            error = f"{error_type}: {first}" if first else error_type
            text = f"{error} (at record {where}; {shard_text})"
        super().__init__(text)
        if traceback:
            self.add_note(f"--- worker traceback ---\n{traceback.rstrip()}")

    def __reduce__(self):  # the constructor takes keywords only
        fields = dict(
            stage=self.stage,
            shard=self.shard,
            num_shards=self.num_shards,
            file=self.file,
            line=self.line,
            error_type=self.error_type,
            message=self.error_message,
            attempts=self.attempts,
            traceback=self.traceback,
            expected=self.expected,
        )
        return partial(type(self), **fields), ()
