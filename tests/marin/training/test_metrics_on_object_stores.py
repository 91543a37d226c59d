"""Metrics on a bucket (a local S3 server, real s3fs): whole parts, bytes linear in the steps, and a
run killed mid-way resumes its metrics without losing or repeating a step."""

import os
import signal
import subprocess
import sys
import uuid

import pytest
from object_stores import environment, s3_server
from train_child import STRAIGHT_STEPS

import storage
from marin.training.metrics import MetricsLog
from marin.training.step_metrics import WALL_CLOCK_FIELDS

CHILD = os.path.join(os.path.dirname(__file__), "train_child.py")
TIMING_FIELDS = WALL_CLOCK_FIELDS


@pytest.fixture(scope="module")
def bucket():
    with s3_server() as server, environment(server.env):
        yield f"{server.scheme}://{server.bucket}"


class PutBytes:
    """The body bytes of every PutObject request the s3fs client sends (a botocore event hook)."""

    def __init__(self, root: str):
        self.sizes: list[int] = []
        self._events = storage.fs_and_path(root)[0].s3.meta.events

    def __enter__(self) -> "PutBytes":
        self._events.register("before-parameter-build.s3.PutObject", self._count)
        return self

    def __exit__(self, *exc) -> None:
        self._events.unregister("before-parameter-build.s3.PutObject", self._count)

    def _count(self, params, **_):
        self.sizes.append(len(params.get("Body") or b""))

    @property
    def total(self) -> int:
        return sum(self.sizes)


def _record(step: int) -> dict:
    return {"step": step, "loss": 1.0 / step, "lr": 3e-4, "tokens": 4096 * step}


def _log_steps(bucket: str, steps: int) -> tuple[int, int, str]:
    """Write `steps` records through a MetricsLog on the bucket: (bytes PUT, bytes of the records, path)."""
    path = storage.join(bucket, uuid.uuid4().hex[:8], "metrics.jsonl")
    with PutBytes(bucket) as puts:
        log = MetricsLog(path, flush_every=10)
        for step in range(1, steps + 1):
            log.write(_record(step))
        log.close()
    payload = len(storage.read_log_bytes(path))
    return puts.total, payload, path


def test_metrics_bytes_written_to_a_bucket_grow_linearly_with_the_steps(bucket):
    small, small_payload, path = _log_steps(bucket, 100)
    large, large_payload, _ = _log_steps(bucket, 200)
    assert small == small_payload and large == large_payload  # every record's bytes are PUT once
    assert large <= 2.05 * small
    assert [r["step"] for r in storage.read_records(path)] == list(range(1, 101))
    names = storage.list_names(storage.parent(path))
    assert sorted(names) == [f"metrics-{n:05d}.jsonl" for n in range(10)]  # a whole object per flush


def test_the_byte_counter_sees_what_appending_to_an_object_costs(bucket):
    # The counter's own check: `append_bytes` rewrites the object, so 20 appends PUT ~20²/2 lines.
    path = storage.join(bucket, uuid.uuid4().hex[:8], "appended.jsonl")
    line = b'{"step": 1}\n'
    with PutBytes(bucket) as puts:
        for _ in range(20):
            storage.append_bytes(path, line)
    assert puts.total == len(line) * sum(range(1, 21))


def _train(cache: str, out: str, steps: int, kill_at: int | None = None) -> subprocess.CompletedProcess:
    args = [sys.executable, CHILD, cache, out, str(steps)] + ([str(kill_at)] if kill_at else [])
    return subprocess.run(args, capture_output=True, text=True, timeout=600)


def _deterministic(path: str) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING_FIELDS} for r in storage.read_records(path)]


def test_a_run_killed_on_a_bucket_resumes_its_metrics_without_losing_or_repeating_a_step(
    bucket, story_cache, straight_run
):
    steps = STRAIGHT_STEPS  # straight_run's (conftest.py): the same run, uninterrupted
    straight = straight_run
    out = storage.join(bucket, uuid.uuid4().hex[:8], "train")
    # checkpoints every 3 steps: killed after step 8, the run resumes from step 6
    killed = _train(story_cache, out, steps, kill_at=8)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert [r["step"] for r in storage.read_records(storage.join(out, "metrics.jsonl"))] == list(range(1, 7))
    resumed = _train(story_cache, out, steps)
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from" in resumed.stdout
    metrics = _deterministic(storage.join(out, "metrics.jsonl"))
    assert [m["step"] for m in metrics] == list(range(1, steps + 1))
    assert metrics == _deterministic(os.path.join(straight, "metrics.jsonl"))
    assert not storage.exists(storage.join(out, "metrics.jsonl"))  # parts only: nothing appended in place
