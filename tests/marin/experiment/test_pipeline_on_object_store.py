"""tokenized() then train_lm() with the prefix on a bucket (a local S3 server, real s3fs): the token
cache, the metrics parts and the checkpoints read back, and a rerun is fully cached."""

import uuid

import pytest
from object_stores import conditional_create_missing, environment, s3_server

import storage
from experiments.llama import llama_nano
from fray.cluster import ResourceConfig
from marin.data.corpus import SOURCE_NAME, stories
from marin.data.token_cache import TokenCache
from marin.data.tokenizer_training import train_byte_level_bpe
from marin.execution.lazy import lower
from marin.execution.step_runner import StepRunner
from marin.experiment.data import tokenized
from marin.experiment.train import train_lm
from marin.training.optim import AdamConfig
from zephyr.config import ZephyrConfig


@pytest.fixture(scope="module")
def prefix():
    with s3_server() as server, environment(server.env):
        root = f"{server.scheme}://{server.bucket}/{uuid.uuid4().hex[:8]}"
        if why := conditional_create_missing(root):
            pytest.skip(why)
        yield root


def test_tokenize_then_train_on_a_bucket_reads_back_cache_metrics_and_checkpoints(prefix, tmp_path):
    tokenizer = str(tmp_path / "tokenizer")
    train_byte_level_bpe(stories(0, 200), 384, tokenizer)
    data = tokenized(
        "tokenized/stories",
        tokenizer=tokenizer,
        source=SOURCE_NAME,
        sample_count=120,
        validation_fraction=0.1,
        zephyr=ZephyrConfig(backend="sync"),
    )
    model = train_lm(
        name="checkpoints/nano",
        model=llama_nano,
        optimizer=AdamConfig(learning_rate=6e-3, weight_decay=0.1),
        datasets={data: 1.0},
        batch_size=2,
        seq_len=128,
        num_train_steps=6,
        resources=ResourceConfig.with_cpu(),
        steps_per_eval=3,
        checkpoint_every=2,
    )
    first = StepRunner(prefix=prefix, progress=False).run([lower(model)])
    assert set(first.outcomes.values()) == {"succeeded"}

    cache = TokenCache.open(first.output_path(lower(data)))
    train = cache.split("train")
    assert train.num_documents > 0 and len(train.document(0)) > 0

    out = first.output_path(lower(model))
    assert out.startswith("s3://")
    assert [r["step"] for r in storage.read_records(storage.join(out, "metrics.jsonl"))] == [1, 2, 3, 4, 5, 6]
    names = storage.list_names(out)
    assert "metrics.jsonl" not in names and "metrics-00000.jsonl" in names  # whole parts, no appends
    assert sorted(storage.list_names(storage.join(out, "checkpoints"))) == ["step-00000004", "step-00000006"]
    assert storage.exists(storage.join(out, "hf", "config.json"))

    again = StepRunner(prefix=prefix, progress=False).run([lower(model)])
    assert set(again.outcomes.values()) == {"cached"}
