"""The per-item score cache: parts written whole, fixed chunks, several writers, sources read only."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from marin.evaluation.score_cache import COMPACT_FILE, Ranks, ScoreCache, item_key, sibling_caches


def _keys(n: int) -> list[str]:
    return [item_key("model", {"s": 1}, "kind", i) for i in range(n)]


def _scorer(calls: list[list[int]]):
    def compute(indices: list[int]) -> list[float]:
        calls.append(list(indices))
        return [float(i) * 0.5 for i in indices]

    return compute


def test_a_resumed_cache_scores_only_the_missing_chunks_with_the_same_items_in_each(tmp_path):
    keys = _keys(10)
    order = list(range(10))[::-1]
    uninterrupted: list[list[int]] = []
    ScoreCache(str(tmp_path / "full"), flush_s=0).score(keys, order, 3, _scorer(uninterrupted))
    assert uninterrupted == [[9, 8, 7], [6, 5, 4], [3, 2, 1], [0]]

    # a first run that wrote two chunks, then died: its parts are what a kill leaves
    first: list[list[int]] = []
    killed = ScoreCache(str(tmp_path / "killed"), flush_s=0)
    with pytest.raises(KeyboardInterrupt):

        def dies_at_third(indices):
            if len(first) == 2:
                raise KeyboardInterrupt
            return _scorer(first)(indices)

        killed.score(keys, order, 3, dies_at_third)
    assert first == uninterrupted[:2]

    again: list[list[int]] = []
    resumed = ScoreCache(str(tmp_path / "killed"), flush_s=0)
    values = resumed.score(keys, order, 3, _scorer(again))
    assert again == uninterrupted[2:]  # nothing rescored, and each chunk holds what it held before
    assert values == [i * 0.5 for i in range(10)]
    assert resumed.counts.to_json() == {"computed": 4, "resumed": 6, "imported": 0}


def test_two_writers_share_the_chunks_and_a_third_with_another_count_reads_them(tmp_path):
    keys, order = _keys(7), list(range(7))
    folder = str(tmp_path / "cache")
    calls: dict[int, list] = {0: [], 1: []}
    barrier = threading.Barrier(2)
    got: dict[int, list] = {}

    def rank(r: int) -> None:  # two processes' worth, as threads: each writes its own parts
        cache = ScoreCache(folder, ranks=Ranks(r, 2, barrier.wait), run_id="0123456789ab", flush_s=0)
        got[r] = cache.score(keys, order, 2, _scorer(calls[r]))

    threads = [threading.Thread(target=rank, args=(r,)) for r in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls[0] == [[0, 1], [4, 5]] and calls[1] == [[2, 3], [6]]
    assert got[0] == got[1] == [i * 0.5 for i in range(7)]
    parts = sorted(os.listdir(folder))
    assert any("-r0-" in p for p in parts) and any("-r1-" in p for p in parts)
    none: list[list[int]] = []
    one = ScoreCache(folder, ranks=Ranks(0, 3), flush_s=0)
    assert one.score(keys, order, 2, _scorer(none)) == [i * 0.5 for i in range(7)] and not none


def test_compaction_writes_one_file_and_removes_only_its_own_parts(tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine, not the cache's")
    (folder / "part-by-hand.jsonl").write_text("not a part by the cache's naming\n")
    cache = ScoreCache(str(folder), flush_s=0)
    cache.score(_keys(4), [0, 1, 2, 3], 1, _scorer([]))
    cache.compact()
    assert sorted(os.listdir(folder)) == sorted([COMPACT_FILE, "notes.txt", "part-by-hand.jsonl"])
    reread = ScoreCache(str(folder))
    assert reread.score(_keys(4), [0, 1, 2, 3], 1, _scorer([])) == [0.0, 0.5, 1.0, 1.5]
    assert reread.counts.resumed == 4


def test_compaction_removes_the_unfinished_part_of_a_writer_killed_mid_write_and_nothing_else(tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir()
    # a SIGKILL between write_atomic's temporary write and its rename leaves this behind
    killed = "part-858ce9573570-r0-000239.jsonl.tmp-10227-139867808041856"
    (folder / killed).write_text('["k", 1.0]\n["half a li')
    (folder / "notes.txt.tmp-1-2").write_text("someone else's temporary file")
    (folder / "part-by-hand.jsonl.tmp-1-2").write_text("not a part by the cache's naming")
    cache = ScoreCache(str(folder), flush_s=0)
    assert cache.score(_keys(2), [0, 1], 1, _scorer([])) == [0.0, 0.5]  # the unfinished part is not read
    cache.compact()
    assert sorted(os.listdir(folder)) == sorted(
        [COMPACT_FILE, "notes.txt.tmp-1-2", "part-by-hand.jsonl.tmp-1-2"]
    )


def test_an_earlier_output_of_the_step_is_read_never_written_and_its_entries_are_copied(tmp_path):
    old = tmp_path / "eval" / "x-0000aaaa"
    new = tmp_path / "eval" / "x-1111bbbb"
    other = tmp_path / "eval" / "y-2222cccc"
    ScoreCache(str(old / "score_cache"), flush_s=0).score(_keys(3), [0, 1, 2], 2, _scorer([]))
    ScoreCache(str(old / "score_cache")).compact()
    before = {p: p.read_bytes() for p in (old / "score_cache").iterdir()}
    assert [Path(p) for p in sibling_caches(str(new))] == [old / "score_cache"]
    assert sibling_caches(str(other)) == []

    calls: list[list[int]] = []
    cache = ScoreCache(str(new / "score_cache"), sources=sibling_caches(str(new)), flush_s=0)
    assert cache.score(_keys(5), [0, 1, 2, 3, 4], 2, _scorer(calls)) == [0.0, 0.5, 1.0, 1.5, 2.0]
    assert calls == [[3], [4]]  # only the added items; the chunk [2, 3] scores only its new one
    assert cache.counts.to_json() == {"computed": 2, "resumed": 0, "imported": 3}
    cache.compact()
    assert {p: p.read_bytes() for p in (old / "score_cache").iterdir()} == before
    standalone = ScoreCache(str(new / "score_cache"))  # the new output holds all five on its own
    assert standalone.score(_keys(5), [0, 1, 2, 3, 4], 2, _scorer(calls)) == [0.0, 0.5, 1.0, 1.5, 2.0]
    assert standalone.counts.resumed == 5


def test_documents_added_to_a_dataset_are_the_only_ones_the_new_evaluation_scores(
    tmp_path, tiny_export, stories, warm_cluster
):
    """Through the step: the grown dataset changes the key, and the new output takes the earlier one's
    scores (`imported`) and scores the added documents alone."""
    import json

    from marin.evaluation.documents import TextDataset
    from marin.evaluation.results import read_results
    from marin.execution.lazy import lower
    from marin.execution.step_runner import StepRunner
    from marin.experiment.evaluate import evaluate

    data = tmp_path / "stories.jsonl"

    def run(documents: list[str], prefix: str):
        data.write_text("".join(json.dumps({"text": t}) + "\n" for t in documents))
        ev = evaluate("eval/grow", model=tiny_export, datasets=[TextDataset("stories", (str(data),))])
        runner = StepRunner(prefix=str(tmp_path / prefix), progress=False, cluster=warm_cluster)
        out = runner.run([ev]).output_path(lower(ev))
        return read_results(out)

    from transformers import AutoTokenizer

    from marin.evaluation.perplexity import rolling_windows

    tokenizer = AutoTokenizer.from_pretrained(tiny_export)

    def windows(documents: list[str]) -> int:  # the items an evaluation of these documents scores
        return sum(
            len(rolling_windows(0, tokenizer.encode(t, add_special_tokens=False), 0, first.max_length))
            for t in documents
        )

    first = run(stories[:8], "out")
    grown = run(stories, "out")
    assert (first.score_cache.computed, first.score_cache.imported) == (windows(stories[:8]), 0)
    assert grown.score_cache.imported == first.score_cache.computed
    assert grown.score_cache.computed == windows(stories[8:]) > 0
    assert grown.perplexity.datasets["stories"].documents == len(stories)
