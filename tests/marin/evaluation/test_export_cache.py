"""The local cache of remote model exports: keyed by content, checked against the manifest, bounded, and
never deleting what it did not write. The remote side is fsspec's memory:// store (an object store in
this process); tests/marin/experiment/test_demo_on_object_stores.py runs it against S3 and GCS servers."""

from __future__ import annotations

import os
import time
import uuid

import orjson
import pytest

import storage
from marin.evaluation import export_cache
from marin.evaluation.errors import CheckpointNotReadyError
from marin.execution.manifest import DIGEST, bytes_digest


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("MARIN_EXPORT_CACHE", str(root))
    return root


def _export(files: dict[str, bytes]) -> tuple[str, list[dict]]:
    """An export on the memory store under a fresh step output, and its step's manifest."""
    out = f"memory://bucket/{uuid.uuid4().hex[:8]}/checkpoints/m"
    for name, data in files.items():
        storage.write_atomic(storage.join(out, "hf", name), data)
    manifest = [
        {"path": f"hf/{n}", "size": len(d), DIGEST: bytes_digest(d)} for n, d in sorted(files.items())
    ]
    manifest.append({"path": "metrics.jsonl", "size": 3, DIGEST: bytes_digest(b"{}\n")})
    return storage.join(out, "hf"), manifest


FILES = {"config.json": b'{"a": 1}', "model.safetensors": os.urandom(2048), "tok/tokenizer.json": b"{}"}


def test_fetch_brings_the_export_local_once_and_reuses_it_across_outputs(cache):
    url, manifest = _export(FILES)
    local = export_cache.fetch(url, manifest)
    assert (
        local.startswith(str(cache)) and open(os.path.join(local, "tok/tokenizer.json"), "rb").read() == b"{}"
    )
    inode = os.stat(os.path.join(local, "model.safetensors")).st_ino

    other_url, other_manifest = _export(FILES)  # the same files written by another run, elsewhere
    assert export_cache.fetch(other_url, other_manifest) == local
    assert os.stat(os.path.join(local, "model.safetensors")).st_ino == inode  # not fetched again
    assert sorted(os.listdir(cache)) == [os.path.basename(local)]  # no partial folder left behind


def test_an_export_that_differs_from_its_manifest_is_refused(cache):
    url, manifest = _export(FILES)
    storage.write_atomic(storage.join(url, "model.safetensors"), b"x" * 2048)  # same size, other bytes
    with pytest.raises(CheckpointNotReadyError, match="does not match its step's manifest"):
        export_cache.fetch(url, manifest)
    assert os.listdir(cache) == []  # the partial fetch removed its own files and folder
    storage.write_atomic(storage.join(url, "extra.bin"), b"1")
    with pytest.raises(CheckpointNotReadyError, match="extra.bin"):
        export_cache.fetch(url, manifest)


def test_eviction_removes_only_the_files_the_cache_wrote(cache, monkeypatch):
    entries = []
    for i in range(3):
        url, manifest = _export({"config.json": b"{}", "model.safetensors": bytes([i]) * 1000})
        entries.append(export_cache.fetch(url, manifest))
    # pretend the first two were last used long ago, oldest first
    for age, entry in zip((3 * 3600, 2 * 3600), entries[:2], strict=False):
        record_path = os.path.join(entry, export_cache.ENTRY_RECORD)
        record = orjson.loads(open(record_path, "rb").read())
        record["last_used"] = time.time() - age
        open(record_path, "wb").write(orjson.dumps(record))
    foreign_file = cache / "notes.txt"  # something another tool keeps in the folder
    foreign_file.write_text("mine")
    foreign_dir = cache / "someone-elses"  # a folder without the cache's record
    foreign_dir.mkdir()
    (foreign_dir / "model.safetensors").write_bytes(b"z" * 5000)
    stray = os.path.join(entries[0], "added-by-hand.txt")  # a file put into an entry by hand
    open(stray, "w").write("keep me")

    removed = export_cache.evict(bound=2500)

    assert removed == [os.path.basename(entries[0])]
    assert os.listdir(entries[0]) == [
        "added-by-hand.txt"
    ]  # its own files gone, the stray kept (and its folder)
    assert os.path.isdir(entries[1]) and os.path.isdir(entries[2])  # within the bound now
    assert foreign_file.read_text() == "mine" and (foreign_dir / "model.safetensors").stat().st_size == 5000
    assert export_cache.evict(bound=0) == [os.path.basename(entries[1])]  # the newest is in use: kept


def test_a_stale_partial_fetch_is_cleared_by_its_own_record_only(cache):
    partial = cache / f"{export_cache.PARTIAL_PREFIX}abc-1234"
    partial.mkdir(parents=True)
    (partial / "config.json").write_text("{}")
    (partial / "not-ours.bin").write_text("?")
    (partial / export_cache.PARTIAL_RECORD).write_bytes(
        orjson.dumps({"files": {"config.json": 2}, "created": time.time() - 2 * export_cache.STALE_PARTIAL_S})
    )
    export_cache.evict(bound=10**12)
    assert sorted(os.listdir(partial)) == ["not-ours.bin"]
