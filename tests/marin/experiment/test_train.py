"""train_lm(): a lazy handle that checks its inputs when declared and trains, resumes and exports when run."""

import json
import os

import pytest

import storage
from experiments.llama import llama_nano
from fray.cluster import ResourceConfig
from marin.data.corpus import SOURCE_NAME, stories
from marin.data.tokenizer_training import train_byte_level_bpe
from marin.execution.errors import StepDefinitionError, StepFailedError
from marin.execution.lazy import lower
from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec
from marin.experiment.data import tokenized
from marin.experiment.train import train_lm
from marin.training.errors import TrainingConfigError
from marin.training.models import LlamaConfig
from marin.training.optim import AdamConfig
from zephyr import ZephyrConfig

IN_PROCESS = ZephyrConfig(backend="sync")


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> str:
    folder = str(tmp_path_factory.mktemp("tokenizer"))
    train_byte_level_bpe(stories(0, 300), 384, folder)
    return folder


@pytest.fixture(scope="module")
def stories_tokenized(tokenizer_dir):
    return tokenized(
        "tokenized/stories",
        tokenizer=tokenizer_dir,
        source=SOURCE_NAME,
        sample_count=300,
        validation_fraction=0.1,
        zephyr=IN_PROCESS,
    )


def _nano_fields(datasets, **overrides) -> dict:
    fields = dict(
        name="checkpoints/nano",
        model=llama_nano,
        optimizer=AdamConfig(learning_rate=6e-3, weight_decay=0.1),
        datasets=datasets,
        batch_size=2,
        seq_len=2048,
        num_train_steps=6,
        resources=ResourceConfig.with_cpu(),
        steps_per_eval=3,
        checkpoint_every=2,
    )
    fields.update(overrides)
    return fields


def _nano(datasets, **overrides):
    return train_lm(**_nano_fields(datasets, **overrides))


def test_seq_len_above_the_model_maximum_is_refused_when_declared(stories_tokenized):
    with pytest.raises(TrainingConfigError, match=r"'checkpoints/nano'.*seq_len=4096.*max_seq_len=2048"):
        _nano({stories_tokenized: 1.0}, seq_len=4096)


@pytest.mark.parametrize("weight", [0, -1.0, float("nan")])
def test_dataset_weight_not_above_zero_is_refused_when_declared(stories_tokenized, weight):
    with pytest.raises(TrainingConfigError, match="tokenized/stories.*weight"):
        _nano({stories_tokenized: weight})


@pytest.mark.parametrize(
    "dataset", ["tokenized/stories", StepSpec(name="x", fn=lambda: None)], ids=["path", "stepspec"]
)
def test_dataset_that_is_not_a_tokenized_handle_is_refused_when_declared(dataset):
    with pytest.raises(TrainingConfigError, match="not a tokenized handle"):
        _nano({dataset: 1.0})


def test_handle_is_hashable_lowers_its_datasets_and_keys_only_what_changes_results(stories_tokenized):
    handle = _nano({stories_tokenized: 1.0})
    assert handle == _nano({stories_tokenized: 1.0}) and hash(handle) == hash(_nano({stories_tokenized: 1.0}))
    spec = lower(handle)
    assert spec.deps == (lower(stories_tokenized),)
    assert spec.hash_attrs["datasets"] == [{"step": "tokenized/stories", "weight": 1.0}]
    assert spec.hash_attrs["seq_len"] == 2048 and spec.hash_attrs["model"]["hidden_dim"] == 32
    two_processes = _nano({stories_tokenized: 1.0}, num_processes=2, cpu_threads=1)
    assert two_processes.to_step_spec().hash_attrs == spec.hash_attrs
    assert two_processes.processes_per_replica == 2 and handle.processes_per_replica == 1
    fsdp = _nano(
        {stories_tokenized: 1.0}, parallelism="fsdp"
    )  # how the processes share the model: not the key
    assert fsdp.config.parallelism == "fsdp" and fsdp.to_step_spec().hash_attrs == spec.hash_attrs


def test_a_tpu_request_is_refused_when_declared_until_a_tpu_trainer_exists(stories_tokenized):
    with pytest.raises(
        TrainingConfigError, match=r"'checkpoints/nano'.*TPU \(v4-8\).*CPUs and CUDA GPUs only"
    ):
        _nano({stories_tokenized: 1.0}, resources=ResourceConfig.with_tpu("v4-8"))


def test_every_train_config_field_is_a_train_lm_keyword_and_only_unmarked_ones_enter_the_key(
    stories_tokenized,
):
    """train_lm's parameters are TrainConfig's fields, declared once; the key follows their NOT_KEY marks."""
    import dataclasses

    from marin.execution.keyed import is_key_field
    from marin.training.config import TrainConfig

    handle = _nano({stories_tokenized: 1.0}, prefetch=2, eval_max_tokens=4096)
    assert handle.config == TrainConfig(
        **{f.name: getattr(handle, f.name) for f in dataclasses.fields(TrainConfig)}
    )
    assert type(handle.config) is TrainConfig and handle.config.prefetch == 2
    keyed = {f.name for f in dataclasses.fields(TrainConfig) if is_key_field(f)}
    attrs = set(lower(handle).hash_attrs) - {"datasets"}
    at_default = {
        f.name
        for f in dataclasses.fields(TrainConfig)
        if f.default is not dataclasses.MISSING and getattr(handle, f.name) == f.default
    }
    published = set(TrainConfig.KEYED_AT_DEFAULT)
    assert attrs == keyed - (at_default - published)  # an option left at its default stays out
    assert "eval_max_tokens" in attrs and published <= attrs
    assert {"z_loss", "ema", "skip_bad_steps", "document_masking"} <= keyed - attrs  # keyed once set
    assert {"num_processes", "device", "prefetch", "parallelism", "grad_accum_steps"}.isdisjoint(keyed)
    fields = _nano_fields({stories_tokenized: 1.0}, prefetch=2, eval_max_tokens=4096)
    positional = train_lm(fields.pop("name"), **fields)
    assert positional == handle


def test_unknown_parallelism_is_refused_when_declared(stories_tokenized):
    with pytest.raises(
        StepDefinitionError,
        match=r"train_lm 'checkpoints/nano': parallelism='zero3' is not one of 'ddp', 'fsdp'",
    ):
        _nano({stories_tokenized: 1.0}, parallelism="zero3")


def test_seed_example_trains_exports_and_a_rerun_reuses_every_step(stories_tokenized, tmp_path):
    model = _nano({stories_tokenized: 1.0})
    first = StepRunner(prefix=str(tmp_path), progress=False).run([lower(model)])
    out = first.output_path(lower(model))
    assert first.outcomes[out] == "succeeded"
    with open(os.path.join(out, ".artifact.json")) as f:
        artifact = json.load(f)
    assert "hf_path" in json.dumps(artifact)
    assert os.path.isfile(os.path.join(out, "hf", "config.json"))
    assert os.path.isfile(os.path.join(out, "hf", "tokenizer.json"))
    assert [r["step"] for r in storage.read_records(os.path.join(out, "metrics.jsonl"))] == [1, 2, 3, 4, 5, 6]
    assert sorted(os.listdir(os.path.join(out, "checkpoints"))) == ["step-00000004", "step-00000006"]

    again = StepRunner(prefix=str(tmp_path), progress=False).run([lower(model)])
    assert set(again.outcomes.values()) == {"cached"}


# The same gang through train_lm with either parallelism: FSDP's own path (sharded checkpoints, resharding)
# is tests/marin/training/test_fsdp.py's, so its run here is in the slow tier.
@pytest.mark.parametrize("parallelism", ["ddp", pytest.param("fsdp", marks=pytest.mark.slow)])
def test_a_two_replica_train_lm_runs_as_one_gang_and_records_world_size_parallelism_and_accumulation(
    stories_tokenized, tmp_path, parallelism
):
    model = _nano(
        {stories_tokenized: 1.0},
        seq_len=256,
        batch_size=4,  # 2 replicas x 2 microbatches of 1 row
        num_train_steps=4,
        grad_accum_steps=2,
        parallelism=parallelism,
        resources=ResourceConfig.with_cpu(1, replicas=2),
    )
    result = StepRunner(prefix=str(tmp_path), progress=False).run([lower(model)])  # the default LocalCluster
    out = result.output_path(lower(model))
    assert result.outcomes[out] == "succeeded"
    with open(os.path.join(out, ".artifact.json")) as f:
        summary = json.load(f)["result"]
    assert (summary["world_size"], summary["parallelism"], summary["grad_accum_steps"]) == (2, parallelism, 2)
    rows = storage.read_records(os.path.join(out, "metrics.jsonl"))
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    assert {(r["world_size"], r["parallelism"], r["grad_accum_steps"]) for r in rows} == {(2, parallelism, 2)}
    sharded = os.path.isdir(os.path.join(out, "checkpoints", "step-00000004", "dcp"))
    assert sharded == (parallelism == "fsdp")  # FSDP: every rank's shards; DDP: rank 0's whole file
    with open(os.path.join(out, ".executor_info")) as f:
        assert json.load(f)["resources"]["replicas"] == 2
    assert os.path.isfile(os.path.join(out, "hf", "config.json"))  # rank 0 exported


def test_tokenizer_larger_than_the_model_embedding_fails_the_step_before_training(
    stories_tokenized, tmp_path
):
    small_vocab = LlamaConfig(
        hidden_dim=32, intermediate_dim=64, num_layers=1, num_heads=2, vocab_size=128, max_seq_len=256
    )
    model = _nano({stories_tokenized: 1.0}, model=small_vocab, seq_len=128)
    with pytest.raises(StepFailedError, match="128 rows"):
        StepRunner(prefix=str(tmp_path), progress=False).run([lower(model)])
    out = os.path.join(str(tmp_path), "checkpoints")
    assert not any(f == "metrics.jsonl" for _, _, files in os.walk(out) for f in files)


def test_empty_token_cache_fails_the_step_before_training(tokenizer_dir, tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    empty = tokenized(
        "tokenized/empty",
        tokenizer=tokenizer_dir,
        paths=[str(tmp_path / "empty.jsonl")],
        zephyr=IN_PROCESS,
        allow_empty=True,  # without it the tokenize step fails first, naming the file
    )
    with pytest.raises(StepFailedError, match="no tokens"):
        StepRunner(prefix=str(tmp_path / "out"), progress=False).run([lower(_nano({empty: 1.0}))])
