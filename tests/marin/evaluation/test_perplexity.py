"""Perplexity / bits-per-byte: rolling windows, agreement with lm-eval-harness, Paloma averages."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marin.evaluation.checkpoint import load_hf_model
from marin.evaluation.documents import EvalDocument
from marin.evaluation.perplexity import prefix_token_id, rolling_windows, score_documents, summarize


def _docs(dataset: str, texts: list[str], domain: str | None = None) -> list[EvalDocument]:
    return [EvalDocument(dataset, domain or dataset, len(t.encode("utf-8")), text=t) for t in texts]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 50), max_size=120), st.integers(1, 16))
def test_rolling_windows_predict_every_token_exactly_once_from_real_context(tokens, max_length):
    windows = rolling_windows(0, tokens, prefix_token=0, max_length=max_length)
    assert [t for w in windows for t in w.targets] == tokens
    stream = [0] + tokens  # stream[k] is the input that predicts tokens[k]
    end = 0
    for w in windows:
        end += len(w.targets)
        assert 1 <= len(w.targets) <= len(w.inputs) <= max_length
        assert w.inputs == tuple(stream[end - len(w.inputs) : end])
        # a later window fills the whole context with the tokens before its targets
        assert len(w.inputs) == max_length or end == len(w.inputs)


def test_bits_per_byte_equals_harness_loglikelihood_rolling(tiny_export, stories):
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    loaded = load_hf_model(tiny_export)
    lengths = [len(loaded.tokenizer.encode(s, add_special_tokens=False)) for s in stories]
    assert max(lengths) > loaded.max_length  # the rolling windows really roll

    ours = summarize(
        score_documents(loaded.model, loaded.tokenizer, _docs("stories", stories), loaded.max_length)
    )

    # The harness does its own tokenization and windowing; it is only told our document-start token.
    harness = HFLM(
        pretrained=tiny_export,
        device="cpu",
        dtype="float32",
        batch_size=4,
        prefix_token_id=prefix_token_id(loaded.tokenizer),
    )
    requests = [Instance("loglikelihood_rolling", {}, (s,), i) for i, s in enumerate(stories)]
    loglikelihoods = harness.loglikelihood_rolling(requests, disable_tqdm=True)
    harness_bpb = -sum(loglikelihoods) / math.log(2) / sum(len(s.encode("utf-8")) for s in stories)

    assert ours["micro"]["bpb"]["value"] == pytest.approx(harness_bpb, rel=1e-5)
    assert ours["micro"]["tokens"] == sum(lengths)


def test_bytes_are_utf8_bytes_of_the_original_text(tiny_export):
    loaded = load_hf_model(tiny_export)
    text = "Zoë ate crème cake at the café. 🎈"
    scores = score_documents(loaded.model, loaded.tokenizer, _docs("d", [text]), loaded.max_length)
    assert scores[0].bytes == len(text.encode("utf-8")) > len(text)
    assert summarize(scores)["micro"]["bpb"]["value"] == pytest.approx(
        scores[0].nll / math.log(2) / scores[0].bytes
    )


def test_micro_pools_tokens_and_macro_averages_datasets_and_domains(tiny_export, stories):
    loaded = load_hf_model(tiny_export)
    docs = _docs("a", stories[:2], "a/x") + _docs("a", stories[2:3], "a/y") + _docs("b", stories[3:7])
    result = summarize(score_documents(loaded.model, loaded.tokenizer, docs, loaded.max_length))

    assert list(result["datasets"]) == ["a", "b"]
    assert list(result["domains"]) == ["a/x", "a/y", "b"]
    a, b = result["datasets"]["a"], result["datasets"]["b"]
    micro = result["micro"]
    assert micro["tokens"] == a["tokens"] + b["tokens"] and micro["bytes"] == a["bytes"] + b["bytes"]
    pooled_nll = a["loss"]["value"] * a["tokens"] + b["loss"]["value"] * b["tokens"]
    assert micro["bpb"]["value"] == pytest.approx(pooled_nll / math.log(2) / micro["bytes"])
    assert micro["perplexity"]["value"] == pytest.approx(math.exp(micro["loss"]["value"]))
    assert result["macro"]["datasets"]["bpb"]["value"] == pytest.approx(
        (a["bpb"]["value"] + b["bpb"]["value"]) / 2
    )
    domains = result["domains"].values()
    assert result["macro"]["domains"]["loss"]["value"] == pytest.approx(
        sum(d["loss"]["value"] for d in domains) / 3
    )
    # every figure carries its interval over documents; perplexity's is exp of loss's
    for metric in (micro["loss"], micro["bpb"], a["bpb"], result["macro"]["datasets"]["bpb"]):
        lo, hi = metric["ci95"]
        assert lo <= metric["value"] <= hi and metric["stderr"] > 0 and metric["n"] in (7, 3)
    assert micro["perplexity"]["ci95"] == pytest.approx([math.exp(x) for x in micro["loss"]["ci95"]])
    assert micro["documents"] == micro["bpb"]["n"] == 7


def test_scores_are_identical_on_rerun_and_independent_of_batch_size(tiny_export, stories):
    loaded = load_hf_model(tiny_export)
    docs = _docs("s", stories)
    first = score_documents(loaded.model, loaded.tokenizer, docs, loaded.max_length, batch_size=4)
    again = score_documents(loaded.model, loaded.tokenizer, docs, loaded.max_length, batch_size=4)
    other = score_documents(loaded.model, loaded.tokenizer, docs, loaded.max_length, batch_size=1)
    assert first == again
    assert [s.nll for s in other] == pytest.approx([s.nll for s in first], rel=1e-5)
