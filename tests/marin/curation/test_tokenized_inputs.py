"""tokenized() and train_tokenizer() take curation handles and StepSpecs as inputs: a real dependency."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from marin.data.token_cache import TokenCache
from marin.execution.errors import StepDefinitionError
from marin.execution.lazy import lower
from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec
from marin.experiment.curation import dedup_exact
from marin.experiment.data import tokenized, train_tokenizer
from zephyr import ZephyrConfig

SYNC = ZephyrConfig(backend="sync", quiet=True)
WORDS = [
    "the",
    "river",
    "and",
    "the",
    "bridge",
    "of",
    "the",
    "old",
    "village",
    "were",
    "painted",
    "with",
    "care",
    "by",
    "the",
    "baker",
]


def write_docs(folder: Path, n: int, repeat_every: int = 0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "docs.jsonl"
    with path.open("w") as f:
        for i in range(n):
            k = i % repeat_every if repeat_every else i
            f.write(
                json.dumps(
                    {
                        "id": i,
                        "text": f"document {k}: " + " ".join(WORDS[(k + j) % len(WORDS)] for j in range(40)),
                    }
                )
                + "\n"
            )
    return path


def test_a_curation_handle_as_source_is_a_dependency_of_tokenized(tmp_path):
    path = write_docs(tmp_path / "raw", 60, repeat_every=20)
    clean = dedup_exact("curated/dedup", str(path), zephyr=SYNC)
    data = tokenized(
        "tokenized/clean",
        source=clean,
        tokenizer=train_tokenizer("tokenizers/clean", vocab_size=300, source=clean),
        zephyr=SYNC,
        validation_fraction=0.0,
    )
    spec = lower(data)
    assert lower(clean) in spec.deps
    assert spec.hash_attrs["input"]["paths"] == ["step:curated/dedup"]
    result = StepRunner(prefix=str(tmp_path / "prefix"), progress=False).run([spec])
    cache = TokenCache.open(result.output_path(spec))
    assert cache.split("train").num_documents == 20  # the 40 repeats were removed upstream


def test_a_stepspec_inside_paths_mixes_with_path_strings(tmp_path):
    extra = write_docs(tmp_path / "extra", 5)

    def produce(output_path: str) -> None:
        write_docs(Path(output_path), 7)

    producer = StepSpec(name="made/docs", fn=produce)
    data = tokenized(
        "tokenized/both",
        paths=[producer, str(extra)],
        tokenizer=train_tokenizer("tokenizers/both", vocab_size=300, paths=[producer]),
        zephyr=SYNC,
        validation_fraction=0.0,
    )
    spec = lower(data)
    assert producer in spec.deps
    result = StepRunner(prefix=str(tmp_path / "prefix"), progress=False).run([spec])
    assert TokenCache.open(result.output_path(spec)).split("train").num_documents == 12


def test_changing_the_upstream_step_changes_the_key_of_tokenized(tmp_path):
    path = str(write_docs(tmp_path / "raw", 3))
    a = lower(tokenized("t/x", source=dedup_exact("c/x", path), tokenizer="gpt2"))
    b = lower(tokenized("t/x", source=dedup_exact("c/x", path, key="id"), tokenizer="gpt2"))
    runner = StepRunner(prefix=str(tmp_path / "p"), progress=False)
    assert runner.plan([a]).of(a).output_path != runner.plan([b]).of(b).output_path


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"source": 3}, "source=3 is an int, expected str or PathLike or StepSpec or a step handle"),
        ({"paths": ["ok.jsonl", 4.5]}, r"paths\[1\]=4.5 is a float, expected str"),
        ({"paths": [None]}, r"paths\[0\]=None is None, expected str"),
    ],
)
def test_anything_else_is_an_error_at_declaration_naming_the_argument(kwargs, message):
    with pytest.raises(StepDefinitionError, match=message):
        tokenized("tokenized/bad", tokenizer="gpt2", **kwargs)
    with pytest.raises(StepDefinitionError, match=message):
        train_tokenizer("tokenizers/bad", vocab_size=300, **kwargs)


def test_a_path_object_as_source_or_paths_is_read_as_its_string(tmp_path):
    path = write_docs(tmp_path / "raw", 6)
    runner = StepRunner(prefix=str(tmp_path / "prefix"), progress=False)
    by_str = lower(tokenized("tokenized/p", paths=[str(path)], tokenizer="gpt2", validation_fraction=0.0))
    by_path = lower(tokenized("tokenized/p", paths=[path], tokenizer="gpt2", validation_fraction=0.0))
    one_path = lower(tokenized("tokenized/p", paths=path, tokenizer="gpt2", validation_fraction=0.0))
    folder = lower(tokenized("tokenized/p", source=path.parent, tokenizer="gpt2", validation_fraction=0.0))
    folder_str = lower(
        tokenized("tokenized/p", source=str(path.parent), tokenizer="gpt2", validation_fraction=0.0)
    )
    assert by_path.hash_attrs == by_str.hash_attrs == one_path.hash_attrs
    assert folder.hash_attrs == folder_str.hash_attrs and folder.inputs == (f"{path.parent}/**",)
    assert runner.plan([by_path]).of(by_path).output_path == runner.plan([by_str]).of(by_str).output_path
