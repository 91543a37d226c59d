"""Fixtures shared by the tests of several marin packages."""

from __future__ import annotations

import pytest

from marin.data.corpus import stories
from marin.data.tokenizer_training import train_byte_level_bpe
from tests.marin.scaling_laws.fit_outputs import FitOutputs, build_fit_outputs


@pytest.fixture(scope="session")
def chat_tokenizer_dir(tmp_path_factory) -> str:
    """A byte-level BPE (at most 512 ids) trained on 300 stories, with the built-in "llama3" chat template."""
    path = str(tmp_path_factory.mktemp("chat-tokenizer"))
    train_byte_level_bpe(stories(0, 300), vocab_size=512, dest=path, chat_template="llama3")
    return path


@pytest.fixture(scope="session")
def chat_model_dir(tmp_path_factory, chat_tokenizer_dir) -> str:
    """A Hugging Face folder: a randomly initialised tiny Llama with the chat tokenizer (a fine-tuning source)."""
    import torch
    from transformers import AutoTokenizer

    from marin.training.export import export_hf
    from marin.training.models import LlamaConfig

    path = str(tmp_path_factory.mktemp("chat-model"))
    vocab = len(AutoTokenizer.from_pretrained(chat_tokenizer_dir))
    config = LlamaConfig(
        hidden_dim=32,
        intermediate_dim=64,
        num_layers=2,
        num_heads=4,
        num_kv_heads=2,
        max_seq_len=512,
        vocab_size=vocab,
    )
    torch.manual_seed(0)
    export_hf(config.build(), config, path, tokenizer_dir=chat_tokenizer_dir, eos_id=1, bos_id=0)
    return path


@pytest.fixture(scope="session")
def fit_outputs(tmp_path_factory) -> FitOutputs:
    """A prefix with two real scaling fits over steps holding a known law's values (see fit_outputs.py)."""
    return build_fit_outputs(tmp_path_factory.mktemp("scaling-fit"))


@pytest.fixture(scope="module")
def warm_cluster():
    """One LocalCluster for a module's StepRunner runs (`StepRunner(..., cluster=warm_cluster)`).

    Its worker processes stay warm between runs, so each step after the module's first pays no
    interpreter start nor torch import (a nano model's training or evaluation is otherwise mostly
    that). A module-scoped fixture: the module's tests form one xdist group (tests/scheduling.py).
    """
    from fray.cluster.local_cluster import LocalCluster

    cluster = LocalCluster(cpu=2)
    yield cluster
    cluster.shutdown()
