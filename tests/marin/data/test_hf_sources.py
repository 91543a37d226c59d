"""Hugging Face datasets as sources, offline: a save_to_disk folder, a local parquet dataset, a cache miss."""

from __future__ import annotations

import datasets
import pytest

from marin.data.file_documents import ShardStats
from marin.data.hf_source import SourceUnavailableError, open_hf_dataset
from marin.data.sources import SourceConfig, iter_documents


def _documents(config: SourceConfig) -> list[str]:
    return list(iter_documents(config.plan(), config.bad_records, ShardStats()))


def test_save_to_disk_folder_reads_the_requested_split_with_exact_sample_count(tmp_path):
    train = datasets.Dataset.from_dict(
        {"text": [f"train story {i}" for i in range(30)], "n": list(range(30))}
    )
    valid = datasets.Dataset.from_dict({"text": ["valid story"], "n": [0]})
    datasets.DatasetDict({"train": train, "validation": valid}).save_to_disk(str(tmp_path / "ds"))
    assert _documents(SourceConfig(source=str(tmp_path / "ds"), sample_count=12)) == [
        f"train story {i}" for i in range(12)
    ]
    assert _documents(SourceConfig(source=str(tmp_path / "ds"), split="validation")) == ["valid story"]


def test_local_parquet_dataset_is_streamed_shard_by_shard(tmp_path):
    folder = tmp_path / "pq" / "data"
    folder.mkdir(parents=True)
    for part in range(2):
        ds = datasets.Dataset.from_dict({"story": [f"p{part} s{i}" for i in range(5)]})
        ds.to_parquet(str(folder / f"train-0000{part}-of-00002.parquet"))
    config = SourceConfig(source=str(tmp_path / "pq"), text_key="story", sample_count=7)
    mode, _ = open_hf_dataset(str(tmp_path / "pq"), None, "train")
    assert mode == "stream"
    assert len(config.plan()) == 2
    assert _documents(config) == [f"p0 s{i}" for i in range(5)] + ["p1 s0", "p1 s1"]


def test_missing_text_column_names_the_columns(tmp_path):
    datasets.Dataset.from_dict({"body": ["x"]}).save_to_disk(str(tmp_path / "ds"))
    with pytest.raises(SourceUnavailableError, match=r"no column 'text'.*body"):
        _documents(SourceConfig(source=str(tmp_path / "ds")))


def test_hub_dataset_missing_from_cache_offline_says_how_to_provide_it():
    with pytest.raises(SourceUnavailableError) as err:
        SourceConfig(source="no-such-user/no-such-dataset-xyz").plan()
    message = str(err.value)
    assert "offline" in message and "save_to_disk" in message and "marin://tinystories-synth" in message
