"""Declared inputs on a real object store (moto's S3 server, fake-gcs-server; real s3fs / gcsfs over
HTTP on 127.0.0.1): an object's key entry is the checksum the store reports in `info` (etag, md5,
crc32c), so planning never reads its bytes, and new bytes rerun the step naming the object."""

from __future__ import annotations

import uuid

import pytest
from object_stores import environment, gcs_server, s3_server

import storage
from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec

CHECKSUM_KINDS = {"s3": ("ETag", "etag"), "gs": ("md5Hash", "crc32c")}


@pytest.fixture(scope="module", params=["s3", "gs"])
def bucket(request):
    """(scheme, bucket URL) of a live local store, with the env that reaches it set."""
    server_of = {"s3": s3_server, "gs": gcs_server}[request.param]
    with server_of() as server, environment(server.env):
        yield request.param, f"{server.scheme}://{server.bucket}"


def noop(output_path):
    return {"ok": True}


def _plan(prefix, spec):
    return StepRunner(prefix=str(prefix), progress=False).plan([spec]).of(spec)


def _input_files(prefix, spec) -> dict:
    """The declared input files as the output's `.executor_info` key record holds them."""
    from marin.execution.records import read_record_json

    info = read_record_json(f"{_plan(prefix, spec).output_path}/.executor_info")
    return info["key_record"]["inputs"]["files"]


def _never_read_bytes(monkeypatch, url: str) -> list:
    """Record every read of an object's bytes through the store's fsspec client (there must be none)."""
    fs, _ = storage.fs_and_path(url)
    reads = []
    for method in ("cat_file", "open", "_cat_file", "_open"):
        if hasattr(type(fs), method):
            original = getattr(fs, method)

            def spy(*args, _original=original, _method=method, **kwargs):
                reads.append((_method, args[:1]))
                return _original(*args, **kwargs)

            monkeypatch.setattr(fs, method, spy)
    return reads


def test_an_object_is_keyed_by_its_store_checksum_and_new_bytes_rerun_the_step(bucket, tmp_path, monkeypatch):
    scheme, root = bucket
    raw = f"{root}/inputs-{uuid.uuid4().hex[:8]}/raw"
    storage.write_bytes(f"{raw}/a.jsonl", b'{"text": "one"}\n')
    storage.write_bytes(f"{raw}/b.jsonl", b'{"text": "two"}\n')
    spec = StepSpec(name="curate", fn=noop, inputs=(f"{raw}/*.jsonl",))
    prefix = tmp_path / "out"
    StepRunner(prefix=str(prefix), progress=False).run([spec])

    reads = _never_read_bytes(monkeypatch, raw)
    files = _input_files(prefix, spec)
    assert sorted(files) == ["raw/a.jsonl", "raw/b.jsonl"]
    for entry in files.values():
        kind = entry["digest"].split(":", 1)[0]
        assert kind in CHECKSUM_KINDS[scheme], entry  # the store's own checksum, not a hash of the bytes
    assert _plan(prefix, spec).state == "cached"
    assert reads == []  # planning asked the store for info only
    monkeypatch.undo()

    storage.write_bytes(f"{raw}/b.jsonl", b'{"text": "TWO"}\n')  # same size, other bytes
    planned = _plan(prefix, spec)
    assert planned.state == "run: changed"
    assert [str(c) for c in planned.changes] == ["inputs: raw/b.jsonl changed (same size, new content)"]
