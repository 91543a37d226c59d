"""The lm-eval-harness bridge: our own two tasks run offline on a real export and agree with our scorer."""

from __future__ import annotations

import json
import os

import pytest

from marin.evaluation.checkpoint import load_hf_model
from marin.evaluation.documents import EvalDocument
from marin.evaluation.errors import HarnessError
from marin.evaluation.harness import OWN_TASKS, run_harness, write_own_tasks, write_samples
from marin.evaluation.perplexity import score_documents, summarize
from marin.evaluation.story_endings import split_ending, story_ending_items


def test_story_ending_items_are_deterministic_and_hold_the_true_ending(stories):
    items = story_ending_items(stories, num_items=8, num_choices=4, seed=3)
    assert items == story_ending_items(stories, num_items=8, num_choices=4, seed=3)
    assert len(items) == 8
    for item, text in zip(items, stories, strict=False):
        context, ending = split_ending(text)
        gap = text.strip()[len(context) : -len(ending)]
        assert item["context"] == context and text.strip() == context + gap + ending and gap.isspace()
        assert item["choices"][item["label"]] == ending
        assert len(set(item["choices"])) == 4


def test_own_tasks_run_offline_and_rolling_bpb_matches_ours(tiny_export, stories, tmp_path):
    assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["HF_DATASETS_OFFLINE"] == "1"
    tasks_dir = write_own_tasks(str(tmp_path / "harness"), stories, num_items=len(stories))

    results = run_harness(tiny_export, OWN_TASKS, tasks_dir, batch_size=4)

    endings = results["marin_story_endings"]
    assert 0.0 <= endings["acc"] <= 1.0 and 0.0 <= endings["acc_norm"] <= 1.0
    assert endings["sample_len"] == len(stories)
    loaded = load_hf_model(tiny_export)
    docs = [EvalDocument("s", "s", len(s.encode("utf-8")), text=s) for s in stories]
    ours = summarize(score_documents(loaded.model, loaded.tokenizer, docs, loaded.max_length))
    assert results["marin_text_perplexity"]["bits_per_byte"] == pytest.approx(ours["micro"]["bpb"], rel=1e-5)


def test_unknown_task_names_our_tasks(tiny_export, stories, tmp_path):
    tasks_dir = write_own_tasks(str(tmp_path / "harness"), stories, num_items=6)
    with pytest.raises(HarnessError, match="marin_story_endings"):
        run_harness(tiny_export, ["marin_no_such_task"], tasks_dir)


def test_harness_per_sample_outputs_are_saved_one_file_per_task(tiny_export, stories, tmp_path):
    tasks_dir = write_own_tasks(str(tmp_path / "harness"), stories, num_items=5)
    run_harness(tiny_export, OWN_TASKS, tasks_dir, batch_size=4, samples_dir=str(tmp_path / "samples"))

    assert sorted(p.name for p in (tmp_path / "samples").iterdir()) == [
        f"{t}.jsonl" for t in sorted(OWN_TASKS)
    ]
    rolling = [json.loads(line) for line in (tmp_path / "samples" / "marin_text_perplexity.jsonl").open()]
    assert [r["doc_id"] for r in rolling] == list(range(5))
    assert rolling[0]["doc"]["text"] == stories[0] and rolling[0]["arguments"] == [[stories[0]]]
    assert set(rolling[0]["metrics"]) == {"word_perplexity", "byte_perplexity", "bits_per_byte"}
    assert rolling[0]["response"][0] < 0  # the document's log-likelihood


def test_saved_harness_samples_are_bounded_in_count_and_text(tmp_path):
    rows = [
        {
            "doc_id": i,
            "doc": {"text": "x" * 50},
            "target": "y",
            "arguments": [("x" * 50,)],
            "resps": [[-1.0]],
            "filtered_resps": [-1.0],
            "metrics": ["acc"],
            "acc": 1.0,
            "doc_hash": "h",
        }
        for i in range(5)
    ]
    files = write_samples(str(tmp_path), {"group/task": rows}, per_task=2, text_chars=10)

    assert files == {"group/task": "group_task.jsonl"}
    saved = [json.loads(line) for line in (tmp_path / "group_task.jsonl").open()]
    assert [r["doc_id"] for r in saved] == [0, 1]
    assert saved[0] == {
        "doc_id": 0,
        "doc": {"text": "x" * 10 + "…"},
        "target": "y",
        "arguments": [["x" * 10 + "…"]],
        "response": [-1.0],
        "metrics": {"acc": 1.0},
    }
