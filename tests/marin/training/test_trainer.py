"""The trainer end to end in one process: it learns, logs every step, evaluates, exports, and refuses bad input."""

import os

import pytest
import torch
import transformers

import storage
from marin.training.config import TrainConfig
from marin.training.datasets import DatasetInput
from marin.training.errors import TrainingConfigError, TrainingDataError
from marin.training.models import LlamaConfig
from marin.training.optim import AdamConfig
from marin.training.schedules import Cosine
from marin.training.trainer import TrainJob, train

MODEL = LlamaConfig(
    hidden_dim=64, intermediate_dim=128, num_layers=2, num_heads=4, num_kv_heads=2, max_seq_len=128
)


def _config(**overrides) -> TrainConfig:
    fields = dict(
        model=MODEL,
        optimizer=AdamConfig(learning_rate=6e-3, schedule=Cosine(warmup=4)),
        batch_size=8,
        seq_len=128,
        num_train_steps=80,
        steps_per_eval=40,
        checkpoint_every=40,
        eval_max_tokens=2048,
        cpu_threads=1,
    )
    fields.update(overrides)
    return TrainConfig(**fields)


@pytest.fixture(scope="module")
def trained(story_cache, other_cache, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("trained"))
    datasets = (DatasetInput("stories", story_cache, 2.0), DatasetInput("other", other_cache, 1.0))
    return out, datasets, train(TrainJob(_config(), datasets, out))


def test_training_loss_falls_well_below_the_unigram_entropy(trained):
    _, _, summary = trained
    assert summary["final_loss"] < summary["train_unigram_entropy"] - 0.7
    assert summary["final_eval_loss"] < summary["train_unigram_entropy"] - 0.7


def test_every_step_logs_loss_lr_grad_norm_throughput_and_mfu_and_evals_follow_steps_per_eval(trained):
    out, _, summary = trained
    records = storage.read_records(os.path.join(out, "metrics.jsonl"))
    assert [r["step"] for r in records] == list(range(1, 81))
    for r in records:
        assert {"loss", "lr", "grad_norm", "tokens_per_s", "mfu", "data_wait_s"} <= r.keys()
        assert r["tokens_per_s"] > 0 and 0 < r["mfu"] < 1
    assert [r["step"] for r in records if "eval_loss" in r] == [40, 80]
    assert records[-1]["eval_bpb"] > 0
    assert records[0]["lr"] < records[3]["lr"] and records[-1]["lr"] < records[3]["lr"]
    assert records[-1]["loss"] < records[0]["loss"]
    assert 0 <= summary["data_wait_fraction"] < 1


def test_export_loads_in_transformers_with_its_tokenizer_and_format_metadata(trained):
    out, _, summary = trained
    hf = summary["hf_path"]
    assert sorted(f for f in os.listdir(hf) if not f.startswith(".")) >= [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
    ]
    model = transformers.AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32)
    tokenizer = transformers.AutoTokenizer.from_pretrained(hf)
    ids = tokenizer("Once upon a time, a little fox", return_tensors="pt").input_ids
    assert model(ids).logits.shape == (1, ids.shape[1], summary["vocab_size"])
    from safetensors import safe_open

    with safe_open(os.path.join(hf, "model.safetensors"), "pt") as f:
        assert f.metadata() == {"format": "pt"}


def test_rerunning_a_finished_run_trains_nothing_and_reports_the_same_result(trained):
    out, datasets, summary = trained
    again = train(TrainJob(_config(), datasets, out))
    assert again["resumed_from_step"] == 80
    assert again["final_loss"] == summary["final_loss"]


def test_empty_token_cache_is_refused_before_any_step(empty_cache, tmp_path):
    empty = empty_cache
    out = tmp_path / "out"
    with pytest.raises(TrainingDataError, match="no tokens"):
        train(TrainJob(_config(), (DatasetInput("empty", empty, 1.0),), str(out)))
    assert not (out / "metrics.jsonl").exists() and not (out / "checkpoints").exists()


def test_tokenizer_larger_than_the_model_embedding_is_refused_before_any_step(story_cache, tmp_path):
    small = _config(
        model=LlamaConfig(hidden_dim=32, intermediate_dim=64, num_layers=1, num_heads=2, vocab_size=100)
    )
    with pytest.raises(TrainingDataError, match="embedding has 100 rows"):
        train(TrainJob(small, (DatasetInput("stories", story_cache, 1.0),), str(tmp_path / "out")))
    assert not (tmp_path / "out" / "metrics.jsonl").exists()


def test_sequence_longer_than_the_model_maximum_is_refused():
    with pytest.raises(TrainingConfigError, match="max_seq_len=128"):
        _config(seq_len=256)
