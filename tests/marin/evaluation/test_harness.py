"""The lm-eval-harness bridge: our own two tasks run offline on a real export, equal the harness run
directly (values and stderrs) and agree with our own scorer."""

from __future__ import annotations

import contextlib
import functools
import json
import os

import pytest

from marin.evaluation import stats
from marin.evaluation.checkpoint import load_hf_model
from marin.evaluation.documents import EvalDocument
from marin.evaluation.errors import HarnessError
from marin.evaluation.harness import OWN_TASKS, harness_tasks, run_tasks, write_own_tasks, write_samples
from marin.evaluation.perplexity import prefix_token_id, score_documents, summarize
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


@pytest.fixture(scope="module")
def harness_run(tiny_export, stories, tmp_path_factory):
    """Our two tasks scored through the bridge (with the sequences it forwarded), and by
    lm_eval.simple_evaluate directly on the same files."""
    os.environ["DISABLE_MULTIPROC"] = "1"
    import lm_eval
    from lm_eval.tasks import TaskManager

    tasks_dir = write_own_tasks(str(tmp_path_factory.mktemp("harness")), stories, num_items=len(stories))
    loaded = load_hf_model(tiny_export)
    with _rows_forwarded(loaded.model) as rows:
        ours = run_tasks(loaded.model, loaded.tokenizer, harness_tasks(OWN_TASKS), tasks_dir, batch_size=4)

    direct = lm_eval.simple_evaluate(
        model="hf",
        model_args={
            "pretrained": tiny_export,
            "dtype": "float32",
            "device": "cpu",
            "add_bos_token": False,
            "prefix_token_id": prefix_token_id(loaded.tokenizer),
        },
        tasks=list(OWN_TASKS),
        task_manager=TaskManager(include_defaults=False, include_path=tasks_dir),
        batch_size=4,
        bootstrap_iters=stats.ITERS,
        log_samples=True,
    )
    return loaded, ours, direct, rows[0]


@contextlib.contextmanager
def _rows_forwarded(model):
    """Count the sequences `model` is run on inside the block (a one-element list, filled at exit)."""
    count = [0]
    hook = model.register_forward_hook(
        lambda _m, args, _out: count.__setitem__(0, count[0] + args[0].shape[0])
    )
    try:
        yield count
    finally:
        hook.remove()


def _score_as_one_of_two_ranks(export: str, stories: list[str], work: str) -> dict:
    """One rank of a two-process gloo group: our tasks through the bridge, the ranks sharing the items."""
    import torch.distributed as dist

    dist.init_process_group("gloo")
    try:
        rank = dist.get_rank()
        tasks_dir = write_own_tasks(os.path.join(work, str(rank)), stories, num_items=len(stories))
        loaded = load_hf_model(export)
        with _rows_forwarded(loaded.model) as rows:
            done = run_tasks(
                loaded.model,
                loaded.tokenizer,
                harness_tasks(OWN_TASKS),
                tasks_dir,
                batch_size=4,
                distributed=True,
            )
        counts: list = [None, None]
        dist.all_gather_object(counts, rows[0])
        metrics = {t: {m: v.to_json() for m, v in r.metrics.items()} for t, r in done.items()}
        return {"rows": counts, "metrics": metrics, "items": {t: r.items for t, r in done.items()}}
    finally:
        dist.destroy_process_group()


def test_two_ranks_share_the_items_and_report_what_one_process_does(
    harness_run, tiny_export, stories, tmp_path
):
    """In-loop evaluation's path (`distributed=True`): each rank of a gloo group scores about half of
    the items, and rank 0's metrics (value, stderr, interval, n) and per-item scores are one process's."""
    from fray.cluster import run_as_local_gang

    _, ours, _, single = harness_run
    shared = run_as_local_gang(
        functools.partial(_score_as_one_of_two_ranks, tiny_export, stories, str(tmp_path)), 2
    )
    assert all(0 < rows <= single // 2 + 8 for rows in shared["rows"]), (shared["rows"], single)
    for task in OWN_TASKS:
        one = {m: v.to_json() for m, v in ours[task].metrics.items()}
        assert shared["metrics"][task].keys() == one.keys()
        for name, metric in one.items():
            got = shared["metrics"][task][name]
            assert got["n"] == metric["n"]
            assert [got["value"], got["stderr"], *got["ci95"]] == pytest.approx(
                [metric["value"], metric["stderr"], *metric["ci95"]], abs=1e-9
            )
        for name, items in ours[task].items.items():
            assert shared["items"][task][name]["ids"] == items["ids"]
            assert shared["items"][task][name]["values"] == pytest.approx(items["values"], abs=1e-9)


def test_bridge_values_and_stderrs_equal_the_harness_run_directly(harness_run, stories):
    """Multiple choice and perplexity: values to 1e-9, stderrs to 1e-6, against simple_evaluate itself."""
    from lm_eval.api.metrics import bits_per_byte, bootstrap_stderr

    assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["HF_DATASETS_OFFLINE"] == "1"
    _, ours, direct, _ = harness_run
    endings = direct["results"]["marin_story_endings"]
    for metric in ("acc", "acc_norm"):
        mine = ours["marin_story_endings"].metrics[metric]
        assert mine.value == pytest.approx(endings[f"{metric},none"], abs=1e-9)
        assert mine.stderr == pytest.approx(endings[f"{metric}_stderr,none"], abs=1e-6)
        assert mine.n == len(stories) and mine.ci95 == stats.wilson_interval(
            round(mine.value * mine.n), mine.n
        )

    rolling = direct["results"]["marin_text_perplexity"]
    for metric in ("bits_per_byte", "byte_perplexity", "word_perplexity"):
        assert ours["marin_text_perplexity"].metrics[metric].value == pytest.approx(
            rolling[f"{metric},none"], rel=1e-9
        )
    # The harness bootstraps no bits-per-byte itself ("N/A"); its own bootstrap_stderr on its own items
    # is the reference, and ours draws the same resamples.
    assert rolling["bits_per_byte_stderr,none"] == "N/A"
    items = [
        row["bits_per_byte"]
        for row in sorted(direct["samples"]["marin_text_perplexity"], key=lambda r: r["doc_id"])
    ]
    reference = bootstrap_stderr(bits_per_byte, items, iters=stats.ITERS)
    assert ours["marin_text_perplexity"].metrics["bits_per_byte"].stderr == pytest.approx(reference, abs=1e-6)


def test_rolling_bpb_of_the_harness_matches_our_own_scorer(harness_run, stories):
    loaded, ours, _, _ = harness_run
    docs = [EvalDocument("s", "s", len(s.encode("utf-8")), text=s) for s in stories]
    mine = summarize(score_documents(loaded.model, loaded.tokenizer, docs, loaded.max_length))
    harness_bpb = ours["marin_text_perplexity"].metrics["bits_per_byte"]
    assert harness_bpb.value == pytest.approx(mine["micro"]["bpb"]["value"], rel=1e-5)
    assert harness_bpb.stderr == pytest.approx(mine["micro"]["bpb"]["stderr"], rel=1e-3)


def test_per_item_scores_are_kept_for_paired_comparisons(harness_run, stories):
    _, ours, _, _ = harness_run
    acc = ours["marin_story_endings"].items["acc"]
    assert len(acc["ids"]) == len(set(acc["ids"])) == len(stories)
    assert sum(acc["values"]) / len(stories) == ours["marin_story_endings"].metrics["acc"].value
    bpb = ours["marin_text_perplexity"].items["bits_per_byte"]
    assert bpb["weights"] == [len(s.encode("utf-8")) for s in stories]


def test_unknown_task_names_our_tasks(tiny_export, stories, tmp_path):
    from marin.evaluation.suites import Task

    tasks_dir = write_own_tasks(str(tmp_path / "harness"), stories, num_items=6)
    loaded = load_hf_model(tiny_export)
    with pytest.raises(HarnessError, match="marin_story_endings"):
        run_tasks(
            loaded.model,
            loaded.tokenizer,
            [Task("x", "marin_no_such_task", "", 0, None, None, None, "")],
            tasks_dir,
        )


def test_harness_per_sample_outputs_are_saved_one_file_per_task(harness_run, stories, tmp_path):
    _, ours, _, _ = harness_run
    write_samples(str(tmp_path / "samples"), {name: r.samples for name, r in ours.items()}, per_task=5)

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


def test_a_generation_task_scores_exact_match_with_an_interval(tiny_export, stories, tmp_path):
    """Generation through the same bridge: the harness's greedy answer is our sampler's, and exact match
    gets a Wilson interval over the items."""
    import re

    from marin.evaluation.harness import next_word_items
    from marin.evaluation.samples import SamplingConfig, generate_samples

    tasks_dir = write_own_tasks(str(tmp_path / "harness"), stories, num_items=len(stories))
    loaded = load_hf_model(tiny_export)
    result = run_tasks(
        loaded.model, loaded.tokenizer, harness_tasks(("marin_next_word",)), tasks_dir, batch_size=4
    )
    metric = result["marin_next_word"].metrics["exact_match"]
    items = next_word_items(stories)
    assert metric.n == len(items) and metric.ci95 == stats.wilson_interval(
        round(metric.value * metric.n), metric.n
    )

    contexts = [item["context"] for item in items]
    ours = generate_samples(
        loaded.model,
        loaded.tokenizer,
        contexts,
        SamplingConfig(max_new_tokens=8, num_samples=0),
        loaded.max_length,
    )
    for row, mine in zip(
        sorted(result["marin_next_word"].samples, key=lambda r: r["doc_id"]), ours, strict=True
    ):
        answer = re.split(r"[ \n.]", mine["text"], maxsplit=1)[0]
        assert row["filtered_resps"][0] == answer
        assert row["exact_match"] == float(answer.lower().strip(".,;:!?\"'") == row["target"].lower())
