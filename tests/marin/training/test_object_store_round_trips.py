"""The token cache, the metrics log and checkpoints round-trip through gs:// and s3:// (local servers,
real gcsfs / s3fs) as they do on local disk."""

import uuid

import numpy as np
import pytest
import torch
from object_stores import environment, gcs_server, s3_server
from torch import nn

import storage
from marin.data.token_cache import TokenCache, token_dtype
from marin.data.token_cache_writer import ShardWriter, write_ledger
from marin.data.tokenize_pipeline import build_ledger
from marin.training.checkpoint import TrainState, list_checkpoints, load_checkpoint, save_checkpoint
from marin.training.metrics import MetricsLog


@pytest.fixture(scope="module", params=["local", "s3", "gs"])
def root(request, tmp_path_factory):
    """A fresh folder on one store, with the env that reaches it set."""
    if request.param == "local":
        yield str(tmp_path_factory.mktemp("local-store"))
        return
    with {"s3": s3_server, "gs": gcs_server}[request.param]() as server, environment(server.env):
        yield f"{server.scheme}://{server.bucket}/{uuid.uuid4().hex[:8]}"


def test_token_cache_written_to_the_store_reads_back_every_document(root):
    cache = storage.join(root, "tokens")
    rng = np.random.default_rng(0)
    docs = [list(rng.integers(1, 500, size=rng.integers(1, 30))) + [0] for _ in range(7)]
    dtype = token_dtype(500)
    summaries = {}
    for split, split_docs in (("train", docs), ("validation", [])):
        writer = ShardWriter(cache, split, 0, dtype)
        if split_docs:
            writer.add(
                np.concatenate([np.asarray(d) for d in split_docs]),
                np.array([len(d) for d in split_docs]),
                np.array([10 * len(d) for d in split_docs]),
            )
        summaries[split] = writer.publish().to_json()
    tokenizer = {"vocab_size": 500, "eos_id": 0, "bos_id": None, "tokenizer_fingerprint": "sha256:test"}
    write_ledger(
        cache,
        build_ledger(
            [{"index": 0, "splits": summaries, "bad_records": 0, "bad_examples": []}],
            dtype=dtype.str,
            tokenizer=tokenizer,
            source={"kind": "test"},
            sample_count=None,
            validation_fraction=0.0,
            bad_records_policy="fail",
        ),
    )
    train = TokenCache.open(cache).split("train")
    assert [train.document(i).tolist() for i in range(len(docs))] == docs
    flat = [t for d in docs for t in d]
    assert train.tokens(2, len(flat) - 3).tolist() == flat[2:-3]  # a ranged read


def test_metrics_log_appends_and_reads_back(root):
    log = MetricsLog(storage.join(root, "train", "metrics.jsonl"))
    for step in range(1, 4):
        log.write({"step": step, "loss": 1.0 / step})
    log.truncate_after(2)
    log.close()
    assert MetricsLog(log.path).read() == [{"step": 1, "loss": 1.0}, {"step": 2, "loss": 0.5}]


def test_checkpoint_saves_prunes_and_loads_bit_for_bit(root):
    directory = storage.join(root, "checkpoints")
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.ones(2, 4)).sum().backward()
    optimizer.step()
    for step in (1, 2, 3):
        state = TrainState(step=step, loader={"position": step}, rng={}, config_fingerprint="fp", extra={})
        save_checkpoint(directory, model=model, optimizer=optimizer, state=state, keep_last_k=2)
    assert list_checkpoints(directory) == [2, 3]
    fresh = nn.Linear(4, 3)
    fresh_optimizer = torch.optim.AdamW(fresh.parameters())
    loaded = load_checkpoint(directory, 3, model=fresh, optimizer=fresh_optimizer, config_fingerprint="fp")
    assert loaded.loader == {"position": 3}
    assert torch.equal(fresh.weight, model.weight) and torch.equal(fresh.bias, model.bias)
    assert torch.equal(
        fresh_optimizer.state_dict()["state"][0]["exp_avg"], optimizer.state_dict()["state"][0]["exp_avg"]
    )
