"""The tokenize step end to end: exact round trip, identical bytes across reruns and backends, resume after SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from marin.data.corpus import stories
from marin.data.sources import EMBEDDED_SOURCE, SourceConfig
from marin.data.token_cache import TokenCache
from marin.data.tokenize_pipeline import split_long_text
from marin.data.tokenize_step import TokenizeConfig, run_tokenize
from zephyr import ZephyrConfig

LONG = " ".join(f"word{i} ünï 🙂" for i in range(400)) + "\n\n  trailing   spaces  "
ODD = ["", " ", "\n", "a", "Café naïve — 東京 🙂", "x" * 3000, LONG]


def _write_jsonl(folder: Path, files: int, docs_per_file: int, extra: list[str] = ()) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    texts = list(stories(0, files * docs_per_file)) + list(extra)
    per = [texts[i * docs_per_file : (i + 1) * docs_per_file] for i in range(files)]
    per[-1] += list(extra)
    for i, chunk in enumerate(per):
        (folder / f"part-{i}.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in chunk))
    return texts


def _config(folder: Path, tokenizer: str, backend: str = "sync", **kw) -> TokenizeConfig:
    source = SourceConfig(
        paths=(str(folder / "*.jsonl"),), **{k: kw.pop(k) for k in ("sample_count", "bad_records") if k in kw}
    )
    zephyr = ZephyrConfig(backend=backend, num_workers=2, quiet=True)
    return TokenizeConfig(
        input=source,
        tokenizer=tokenizer,
        validation_fraction=kw.pop("validation_fraction", 0.2),
        zephyr=zephyr,
        **kw,
    )


def _tree_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _decoded(cache: TokenCache, split: str) -> list[str]:
    tok = Tokenizer.from_file(f"{cache.tokenizer_path}/tokenizer.json")
    data = cache.split(split)
    out = []
    for i in range(data.num_documents):
        ids = data.document(i).tolist()
        assert ids[-1] == cache.eos_id
        out.append(tok.decode(ids[:-1], skip_special_tokens=False))
    return out


def test_decoding_the_cache_gives_back_every_document(tmp_path, tiny_tokenizer_dir):
    texts = _write_jsonl(tmp_path / "in", files=2, docs_per_file=60, extra=ODD)
    summary = run_tokenize(
        _config(tmp_path / "in", tiny_tokenizer_dir, max_chunk_chars=200), str(tmp_path / "out")
    )
    cache = TokenCache.open(str(tmp_path / "out"))
    train, valid = _decoded(cache, "train"), _decoded(cache, "validation")
    assert sorted(train + valid) == sorted(texts)
    assert train == [t for t in texts if t in set(train)]  # source order kept within a split
    assert valid and train
    assert summary["documents"] == {"train": len(train), "validation": len(valid)}
    for split in ("train", "validation"):
        data = cache.split(split)
        decoded = train if split == "train" else valid
        assert [data.document_bytes(i) for i in range(data.num_documents)] == [
            len(t.encode()) for t in decoded
        ]
    ledger = cache.ledger
    assert ledger["tokenizer_fingerprint"].startswith("sha256:") and ledger["eos_policy"] == "append"
    assert ledger["dtype"] == "<u2" and ledger["source"]["kind"] == "files"
    assert sorted(os.listdir(cache.tokenizer_path)) == sorted(os.listdir(tiny_tokenizer_dir))


def test_long_documents_are_cut_at_whitespace_into_pieces_that_rejoin():
    pieces = split_long_text(LONG, 200)
    assert "".join(pieces) == LONG
    assert all(len(p) <= 200 for p in pieces) and len(pieces) > 10
    assert all(p[0].isspace() for p in pieces[1:])
    assert split_long_text("y" * 450, 200) == ["y" * 200, "y" * 200, "y" * 50]


def test_reruns_and_backends_write_identical_bytes(tmp_path, tiny_tokenizer_dir):
    _write_jsonl(tmp_path / "in", files=3, docs_per_file=80, extra=ODD)
    for name, backend in (("sync-a", "sync"), ("sync-b", "sync"), ("processes", "processes")):
        run_tokenize(_config(tmp_path / "in", tiny_tokenizer_dir, backend), str(tmp_path / name))
    reference = _tree_bytes(tmp_path / "sync-a")
    assert "ledger.json" in reference and "train/part-00002.tokens" in reference
    assert _tree_bytes(tmp_path / "sync-b") == reference
    assert _tree_bytes(tmp_path / "processes") == reference


@pytest.mark.parametrize("count", [1, 79, 80, 81, 200])
def test_sample_count_is_exact(tmp_path, tiny_tokenizer_dir, count):
    _write_jsonl(tmp_path / "in", files=3, docs_per_file=80)
    summary = run_tokenize(
        _config(tmp_path / "in", tiny_tokenizer_dir, sample_count=count), str(tmp_path / "out")
    )
    cache = TokenCache.open(str(tmp_path / "out"))
    assert sum(summary["documents"].values()) == count
    assert cache.ledger["sample_count"] == count
    assert sorted(_decoded(cache, "train") + _decoded(cache, "validation")) == sorted(stories(0, count))


def test_malformed_line_stops_the_step_with_file_and_line(tmp_path, tiny_tokenizer_dir):
    _write_jsonl(tmp_path / "in", files=1, docs_per_file=5)
    with open(tmp_path / "in" / "part-0.jsonl", "a") as f:
        f.write('{"text": "fine"}\n{"text": truncated\n')
    with pytest.raises(Exception, match=r"part-0.jsonl:7"):
        run_tokenize(_config(tmp_path / "in", tiny_tokenizer_dir), str(tmp_path / "out"))
    assert not (tmp_path / "out" / "ledger.json").exists()


def test_skip_policy_counts_malformed_lines_in_the_ledger(tmp_path, tiny_tokenizer_dir):
    _write_jsonl(tmp_path / "in", files=1, docs_per_file=5)
    with open(tmp_path / "in" / "part-0.jsonl", "a") as f:
        f.write('{"text": truncated\n{"title": "no text"}\n{"text": "last"}\n')
    summary = run_tokenize(
        _config(tmp_path / "in", tiny_tokenizer_dir, bad_records="skip"), str(tmp_path / "out")
    )
    ledger = TokenCache.open(str(tmp_path / "out")).ledger
    assert summary["bad_records"] == ledger["bad_records"] == 2
    assert ledger["bad_examples"][0].startswith(f"{tmp_path / 'in' / 'part-0.jsonl'}:6")
    assert sum(summary["documents"].values()) == 6


_KILLABLE = """
import sys
from marin.data.sources import SourceConfig
from marin.data.tokenize_step import TokenizeConfig, run_tokenize
from zephyr import ZephyrConfig
folder, tokenizer, out = sys.argv[1:]
config = TokenizeConfig(SourceConfig(paths=(folder + "/*.jsonl",)), tokenizer=tokenizer, validation_fraction=0.2,
                        batch_size=16, zephyr=ZephyrConfig(backend="sync", quiet=True))
run_tokenize(config, out)
"""


def test_run_killed_mid_tokenization_resumes_to_the_same_bytes(tmp_path, tiny_tokenizer_dir):
    _write_jsonl(tmp_path / "in", files=8, docs_per_file=400)
    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLABLE, str(tmp_path / "in"), tiny_tokenizer_dir, str(killed)]
    )
    deadline = time.monotonic() + 120
    while not (killed / "shards" / "part-00001.json").exists():
        assert proc.poll() is None, "the tokenize subprocess ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (killed / "ledger.json").exists(), "the run finished before the kill; the test proves nothing"
    finished_before = len(os.listdir(killed / "shards"))
    assert finished_before < 8

    config = _config(tmp_path / "in", tiny_tokenizer_dir, batch_size=16)
    summary = run_tokenize(config, str(killed))
    assert summary["shards_resumed"] >= finished_before
    run_tokenize(config, str(tmp_path / "clean"))
    survivors = _tree_bytes(killed)
    assert not [n for n in survivors if ".tmp-" in n]
    assert survivors == _tree_bytes(tmp_path / "clean")


def test_embedded_source_tokenizes_offline(tmp_path, tiny_tokenizer_dir):
    config = TokenizeConfig(
        SourceConfig(source=EMBEDDED_SOURCE, sample_count=300),
        tokenizer=tiny_tokenizer_dir,
        validation_fraction=0.1,
        zephyr=ZephyrConfig(backend="sync", quiet=True),
    )
    summary = run_tokenize(config, str(tmp_path / "out"))
    cache = TokenCache.open(str(tmp_path / "out"))
    assert sum(summary["documents"].values()) == 300
    assert sorted(_decoded(cache, "train") + _decoded(cache, "validation")) == sorted(stories(0, 300))
    assert cache.ledger["source"] == {
        "kind": "embedded",
        "name": EMBEDDED_SOURCE,
        "size": 50_000,
        "text_key": "text",
        "sample_count": 300,
        "bad_records": "fail",
    }


def test_ray_backend_writes_the_same_bytes_as_sync(tmp_path, tiny_tokenizer_dir, ray_nodes):
    _write_jsonl(tmp_path / "in", files=3, docs_per_file=40, extra=ODD)
    run_tokenize(_config(tmp_path / "in", tiny_tokenizer_dir, "sync"), str(tmp_path / "sync"))
    run_tokenize(_config(tmp_path / "in", tiny_tokenizer_dir, "ray"), str(tmp_path / "ray"))
    assert _tree_bytes(tmp_path / "ray") == _tree_bytes(tmp_path / "sync")
