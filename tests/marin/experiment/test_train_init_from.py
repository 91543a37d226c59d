"""train_lm(init_from=...): training starts from another step's, a checkpoint's or an HF folder's weights.

Real torch on CPU, a tiny model, run by the real StepRunner.
"""

import glob
import os

import pytest
from safetensors.torch import load_file

import storage
from marin.data.corpus import SOURCE_NAME, stories
from marin.data.tokenizer_training import train_byte_level_bpe
from marin.execution.errors import StepDefinitionError, StepFailedError
from marin.execution.lazy import lower
from marin.execution.step_runner import StepRunner
from marin.experiment.data import tokenized
from marin.experiment.train import train_lm
from marin.training.models import LlamaConfig
from marin.training.optim import AdamConfig
from marin.training.schedules import Cosine
from zephyr import ZephyrConfig

TINY = LlamaConfig(
    hidden_dim=32, intermediate_dim=64, num_layers=2, num_heads=4, num_kv_heads=2, max_seq_len=64
)


@pytest.fixture(scope="module")
def cluster(warm_cluster):
    return warm_cluster


def _runner(prefix, cluster) -> StepRunner:
    return StepRunner(prefix=str(prefix), progress=False, cluster=cluster)


@pytest.fixture(scope="module")
def stories_tokenized(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("tokenizer"))
    train_byte_level_bpe(stories(0, 300), 384, folder)
    return tokenized(
        "tokenized/stories",
        tokenizer=folder,
        source=SOURCE_NAME,
        sample_count=200,
        validation_fraction=0.1,
        zephyr=ZephyrConfig(backend="sync"),
    )


def _train(name, datasets, **overrides):
    fields = dict(
        name=name,
        model=TINY,
        optimizer=AdamConfig(learning_rate=3e-3, schedule=Cosine(warmup=1)),
        datasets=datasets,
        batch_size=4,
        seq_len=32,
        num_train_steps=4,
        eval_max_tokens=512,
        cpu_threads=1,
        seed=1,
    )
    fields.update(overrides)
    return train_lm(**fields)


@pytest.fixture(scope="module")
def source(stories_tokenized, tmp_path_factory, cluster):
    """A trained source run: (prefix, its handle, its output folder, its artifact result)."""
    prefix = str(tmp_path_factory.mktemp("prefix"))
    handle = _train("checkpoints/source", {stories_tokenized: 1.0})
    result = _runner(prefix, cluster).run([handle])
    out = result.output_path(lower(handle))
    return prefix, handle, out, result.results[out]


def _weights(folder: str) -> dict:
    return load_file(os.path.join(folder, "model.safetensors"))


@pytest.mark.parametrize("kind", ["step", "train output", "checkpoint folder", "hf folder"])
def test_training_starts_from_the_source_weights_whose_loss_it_reproduces_at_step_0(
    stories_tokenized, source, cluster, kind
):
    prefix, source_handle, source_out, source_result = source
    init_from = {
        "step": source_handle,
        "train output": source_out,
        "checkpoint folder": f"{source_out}/checkpoints/step-00000004",
        "hf folder": f"{source_out}/hf",
    }[kind]
    handle = _train("checkpoints/finetune", {stories_tokenized: 1.0}, init_from=init_from, num_train_steps=2)
    spec = lower(handle)
    if kind == "step":
        assert lower(source_handle) in spec.deps and spec.hash_attrs["init_from"] == {
            "step": "checkpoints/source"
        }
    else:
        assert spec.hash_attrs["init_from"] == {"path": init_from}
    result = _runner(prefix, cluster).run([handle])
    summary = result.results[result.output_path(spec)]

    # Before step 0 the run scores the weights it starts from: exactly the source's final eval loss.
    record = summary["init_from"]
    assert record["init_eval_loss"] == source_result["final_eval_loss"]
    assert record["kind"] == ("hf" if kind == "hf folder" else "checkpoint")
    loaded = f"{source_out}/hf" if kind == "hf folder" else f"{source_out}/checkpoints/step-00000004"
    assert record["path"] == f"{loaded}/model.safetensors" and len(record["xxh3_128"]) == 32
    # ... and trains on from there. Same seed, same data: without init_from its first step would be the
    # source's first step to the bit; it starts lower.
    fresh_first_loss = storage.read_records(os.path.join(source_out, "metrics.jsonl"))[0]["loss"]
    first_loss = storage.read_records(os.path.join(result.output_path(spec), "metrics.jsonl"))[0]["loss"]
    assert first_loss < fresh_first_loss


def test_the_source_is_part_of_the_key(stories_tokenized, source, tmp_path):
    _, source_handle, source_out, _ = source
    keys = {
        StepRunner(prefix=str(tmp_path), progress=False).plan([h]).steps[-1].key
        for h in (
            _train("checkpoints/finetune", {stories_tokenized: 1.0}),
            _train("checkpoints/finetune", {stories_tokenized: 1.0}, init_from=source_handle),
            _train("checkpoints/finetune", {stories_tokenized: 1.0}, init_from=f"{source_out}/hf"),
            _train("checkpoints/finetune", {stories_tokenized: 1.0}, init_from=source_out),
        )
    }
    assert len(keys) == 4
    other_source = _train("checkpoints/source", {stories_tokenized: 1.0}, seed=2)
    a = (
        StepRunner(prefix=str(tmp_path), progress=False)
        .plan([_train("checkpoints/finetune", {stories_tokenized: 1.0}, init_from=source_handle)])
        .steps[-1]
        .key
    )
    b = (
        StepRunner(prefix=str(tmp_path), progress=False)
        .plan([_train("checkpoints/finetune", {stories_tokenized: 1.0}, init_from=other_source)])
        .steps[-1]
        .key
    )
    assert a != b  # a changed source step changes the key through its dependency key


def test_a_source_of_another_shape_or_kind_fails_naming_it(stories_tokenized, source, cluster, tmp_path):
    _, _, source_out, _ = source
    wider = LlamaConfig(
        hidden_dim=64, intermediate_dim=64, num_layers=2, num_heads=4, num_kv_heads=2, max_seq_len=64
    )
    handle = _train("checkpoints/wider", {stories_tokenized: 1.0}, model=wider, init_from=source_out)
    with pytest.raises(
        StepFailedError, match=r"parameters of other shapes than the model.*init_from needs the"
    ):
        _runner(tmp_path, cluster).run([handle])
    (tmp_path / "empty").mkdir()
    handle = _train("checkpoints/nothing", {stories_tokenized: 1.0}, init_from=str(tmp_path / "empty"))
    with pytest.raises(StepFailedError, match=rf"init_from {tmp_path}/empty: not a train step's output"):
        _runner(tmp_path, cluster).run([handle])
    with pytest.raises(StepDefinitionError, match="init_from=3 is an int, expected TrainLm or StepSpec"):
        _train("checkpoints/bad", {stories_tokenized: 1.0}, init_from=3)


def test_replacing_the_weights_at_an_init_from_path_reruns_the_step_naming_the_file(
    stories_tokenized, source, cluster, tmp_path
):
    import shutil

    from safetensors.torch import save_file

    _, _, source_out, _ = source
    weights = tmp_path / "weights" / "hf"
    shutil.copytree(f"{source_out}/hf", weights)
    prefix = str(tmp_path / "prefix")
    handle = _train(
        "checkpoints/finetune", {stories_tokenized: 1.0}, init_from=str(weights), num_train_steps=1
    )
    _runner(prefix, cluster).run([handle])
    assert StepRunner(prefix=prefix, progress=False).plan([handle]).steps[-1].state == "cached"

    tensors = load_file(str(weights / "model.safetensors"))
    first = sorted(tensors)[0]
    tensors[first] = tensors[first] + 1.0  # other weights of the same shapes
    save_file(tensors, str(weights / "model.safetensors"))
    planned = StepRunner(prefix=prefix, progress=False).plan([handle]).steps[-1]
    assert planned.state == "run: changed"
    assert [str(c).split(" (")[0] for c in planned.changes] == ["inputs: hf/model.safetensors changed"]


def test_a_train_output_given_by_path_declares_its_checkpoints_checksums_as_inputs(source, stories_tokenized):
    # A checkpoint's checksums.json digests its files at save (and is checked before loading), so it
    # stands for gigabytes of weights and optimizer state that planning need not hash.
    _, _, source_out, _ = source
    spec = lower(_train("checkpoints/finetune", {stories_tokenized: 1.0}, init_from=source_out))
    assert spec.inputs == (f"{source_out}/checkpoints/*/checksums.json",)
    (checkpoint,) = sorted(glob.glob(f"{source_out}/checkpoints/step-*"))[-1:]
    spec = lower(_train("checkpoints/finetune", {stories_tokenized: 1.0}, init_from=checkpoint))
    assert spec.inputs == (f"{checkpoint}/checksums.json",)
    spec = lower(_train("checkpoints/finetune", {stories_tokenized: 1.0}, init_from=f"{source_out}/hf"))
    assert spec.inputs == (f"{source_out}/hf/**",)


def test_a_newer_checkpoint_at_an_init_from_train_output_reruns_the_step(
    stories_tokenized, source, cluster, tmp_path
):
    import shutil

    _, _, source_out, _ = source
    copy = tmp_path / "source-copy"
    shutil.copytree(source_out, copy)
    prefix = str(tmp_path / "prefix")
    handle = _train("checkpoints/finetune", {stories_tokenized: 1.0}, init_from=str(copy), num_train_steps=1)
    _runner(prefix, cluster).run([handle])
    assert StepRunner(prefix=prefix, progress=False).plan([handle]).steps[-1].state == "cached"
    newest = sorted((copy / "checkpoints").glob("step-*"))[-1]
    shutil.copytree(newest, newest.with_name("step-99999999"))  # what a further save adds
    planned = StepRunner(prefix=prefix, progress=False).plan([handle]).steps[-1]
    assert planned.state == "run: changed"
    assert [str(c).split(" (")[0] for c in planned.changes] == [
        "inputs: checkpoints/step-99999999/checksums.json added"
    ]
