"""score_documents with a Hugging Face sequence-classification model given by path equals the scores
transformers computes itself, one document at a time, for a softmax head and a regression head.

The steps run in this process (ThreadCluster, zephyr's sync backend), which has torch and
transformers imported already: what is checked is the numbers, not the cluster."""

from __future__ import annotations

import numpy as np
import pytest

from fray.cluster import ThreadCluster
from marin.curation.scorers import HFClassifier
from marin.data.corpus.web import main_text, truth
from marin.execution.lazy import lower
from marin.execution.step_runner import StepRunner
from marin.experiment.curation import score_documents
from tests.marin.curation.test_quality_classifier import SYNC, read_dir, write_jsonl

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

POSITIONS = 512  # the model's, and HFClassifier's default max_length


def tiny_classifier(tokenizer_dir: str, dest: str, labels: list[str]) -> str:
    """A randomly initialised two-layer BERT with a head of len(labels) outputs, saved with the tokenizer."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer_dir)
    config = transformers.BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=POSITIONS,
        pad_token_id=tokenizer.pad_token_id,
        num_labels=len(labels),
        id2label=dict(enumerate(labels)),
        label2id={name: i for i, name in enumerate(labels)},
    )
    torch.manual_seed(0)
    transformers.BertForSequenceClassification(config).save_pretrained(dest)
    tokenizer.save_pretrained(dest)
    return dest


def direct_outputs(model_dir: str, texts: list[str], max_length: int = POSITIONS) -> np.ndarray:
    """The model's logits for each text on its own (no padding), truncated at `max_length` tokens."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    with torch.no_grad():
        return np.stack(
            [
                model(**tokenizer(text, truncation=True, max_length=max_length, return_tensors="pt"))
                .logits[0]
                .numpy()
                for text in texts
            ]
        )


@pytest.fixture(scope="module")
def documents(tmp_path_factory) -> tuple[str, list[str]]:
    """40 graded web pages cut to unlike lengths, from a sentence to the whole page: some are truncated,
    and every batch of them is padded."""
    pages = [main_text(i, 5, 4)[0] for i in range(80) if truth(i, 5, 4).kind == "clean"][:40]
    texts = [page[: 40 + 97 * k] for k, page in enumerate(pages)]
    path = write_jsonl(tmp_path_factory.mktemp("hf-docs") / "docs.jsonl", [{"text": t} for t in texts])
    return path, texts


def test_a_softmax_head_scores_a_labels_probability_as_transformers_computes_it(
    documents, chat_tokenizer_dir, tmp_path
):
    path, texts = documents
    model = tiny_classifier(chat_tokenizer_dir, str(tmp_path / "clf"), ["low", "medium", "high"])
    lengths = [len(ids) for ids in transformers.AutoTokenizer.from_pretrained(model)(texts)["input_ids"]]
    assert max(lengths) > POSITIONS and min(lengths) < 128  # truncated, and padded in a batch
    by_path = score_documents_step("hf/by-path", path, model)
    by_label = score_documents_step("hf/medium", path, HFClassifier(model, label="medium", max_length=128))
    default_dir, medium_dir = run(tmp_path / "prefix", by_path, by_label)
    default = np.array([r["attributes"]["quality"] for r in read_dir(default_dir)])
    medium = np.array([r["attributes"]["quality"] for r in read_dir(medium_dir)])
    softmax = torch.softmax(torch.from_numpy(direct_outputs(model, texts)), -1).numpy()
    np.testing.assert_allclose(default, softmax[:, 2], atol=1e-5)  # a model by path: the last label
    softmax = torch.softmax(torch.from_numpy(direct_outputs(model, texts, max_length=128)), -1).numpy()
    np.testing.assert_allclose(medium, softmax[:, 1], atol=1e-5)


def test_a_regression_head_scores_its_raw_output_as_transformers_computes_it(
    documents, chat_tokenizer_dir, tmp_path
):
    path, texts = documents
    model = tiny_classifier(chat_tokenizer_dir, str(tmp_path / "edu"), ["score"])
    (out,) = run(tmp_path / "prefix", score_documents_step("hf/edu", path, model))
    ours = np.array([r["attributes"]["quality"] for r in read_dir(out)])
    np.testing.assert_allclose(ours, direct_outputs(model, texts)[:, 0], atol=1e-5)


def score_documents_step(name: str, path: str, classifier):
    return score_documents(name, path, classifier=classifier, zephyr=SYNC)


def run(prefix, *handles) -> list[str]:
    result = StepRunner(prefix=str(prefix), cluster=ThreadCluster(), progress=False).run(
        [lower(h) for h in handles]
    )
    return [result.output_path(lower(h)) for h in handles]
