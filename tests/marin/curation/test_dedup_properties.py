"""Dedup output depends only on the documents and their order: not on how they are split into files,
how a large file is cut into pieces, the shuffle's shard count, spilling, or the backend (sync,
processes, a real Ray cluster)."""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from marin.curation.dedup import DedupConfig, normalize, run_dedup_step
from marin.curation.extract import html_to_text
from marin.data.corpus.web import page
from zephyr import ZephyrConfig

CORPUS = [html_to_text(page(i)["html"]) for i in range(150)]


def write_split(folder: Path, docs: list[str], cuts: list[int]) -> str:
    """The documents in files cut at `cuts` (sorted names keep the order)."""
    folder.mkdir(parents=True, exist_ok=True)
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(docs)}), len(docs)]
    for k, (a, b) in enumerate(itertools.pairwise(bounds)):
        with (folder / f"docs-{k:03d}.jsonl").open("w") as f:
            for i in range(a, b):
                f.write(json.dumps({"id": i, "text": docs[i]}) + "\n")
    return str(folder / "*.jsonl")


def read_output(folder: Path) -> list[int]:
    ids = []
    for part in sorted(folder.glob("part-*.jsonl.zst")):
        data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(part.read_bytes())).read()
        ids += [json.loads(line)["id"] for line in data.splitlines()]
    return ids


def dedup(method: str, pattern: str, out: Path, num_shards: int, backend: str, **kw) -> list[int]:
    config = DedupConfig(
        method,
        (pattern,),
        num_shards=num_shards,
        **kw,
        zephyr=ZephyrConfig(backend=backend, num_workers=2, quiet=True, memory_budget_bytes=64 * 1024),
    )
    run_dedup_step(config, str(out))
    assert not (out / "_work").exists()  # the signature files of pass 1 are gone
    return read_output(out)


def expected_exact(docs: list[str]) -> list[int]:
    seen, keep = set(), []
    for i, d in enumerate(docs):
        if normalize(d) not in seen:
            seen.add(normalize(d))
            keep.append(i)
    return keep


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    picks=st.lists(st.integers(0, len(CORPUS) - 1), min_size=1, max_size=80),
    cuts=st.lists(st.integers(1, 79), max_size=5),
    num_shards=st.integers(1, 6),
    method=st.sampled_from(["exact", "fuzzy"]),
    piece_bytes=st.sampled_from([1 << 25, 6_000, 700]),
)
def test_dedup_is_independent_of_file_split_and_shard_count(
    tmp_path_factory, picks, cuts, num_shards, method, piece_bytes
):
    docs = [CORPUS[p] for p in picks]
    base = tmp_path_factory.mktemp("d")
    one_file = dedup(method, write_split(base / "one", docs, []), base / "out-one", 1, "sync")
    split_input = write_split(base / "split", docs, cuts)
    split = dedup(method, split_input, base / "out-split", num_shards, "sync", piece_bytes=piece_bytes)
    assert split == one_file
    if method == "exact":
        assert one_file == expected_exact(docs)
    else:
        assert set(one_file) <= set(range(len(docs))) and 0 in one_file  # the earliest document always stays


@pytest.fixture(scope="module")
def ray_backend(ray_nodes):
    yield


@pytest.mark.parametrize("method", ["exact", "fuzzy"])
def test_every_backend_keeps_the_same_documents(tmp_path, ray_backend, method):
    docs = CORPUS + CORPUS[:40]  # exact copies on top of web-synth's own duplicates
    pattern = write_split(tmp_path / "in", docs, [37, 90, 151])
    results = {
        b: dedup(method, pattern, tmp_path / f"out-{b}", 3, b, piece_bytes=50_000)  # files cut in pieces
        for b in ("sync", "processes", "ray")
    }
    assert results["sync"] == results["processes"] == results["ray"]
    assert len(results["sync"]) < len(CORPUS)
    assert not any(150 <= i for i in results["sync"])  # every appended copy is a duplicate of an earlier page
    assert len(list((tmp_path / "out-sync").glob("part-*"))) > 4  # more pieces than the 4 files
