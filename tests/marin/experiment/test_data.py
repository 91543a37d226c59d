"""tokenized() and train_tokenizer(): lazy handles, keys that carry every parameter, and real runs."""

from __future__ import annotations

import sys

import pytest

from marin.data.token_cache import TokenCache
from marin.data.tokenizer import describe_tokenizer
from marin.execution.errors import StepDefinitionError
from marin.execution.lazy import lower
from marin.execution.step_runner import StepRunner
from marin.experiment.data import EMBEDDED_SOURCE, tokenized, train_tokenizer
from zephyr import ZephyrConfig

_watching = False
_touched: list[tuple[str, str]] = []


def _audit(event: str, args: tuple) -> None:
    if _watching and event in ("open", "os.listdir", "os.scandir", "socket.connect", "socket.getaddrinfo"):
        _touched.append((event, repr(args)[:120]))


sys.addaudithook(_audit)


def _declare_and_lower_while_watching(build):
    global _watching
    _touched.clear()
    _watching = True
    try:
        spec = lower(build())
    finally:
        _watching = False
    return spec


def test_the_watch_sees_file_access(tmp_path):
    def build():
        (tmp_path / "probe").write_text("x")
        return train_tokenizer("tokenizers/probe", vocab_size=300, source=EMBEDDED_SOURCE)

    _declare_and_lower_while_watching(build)
    assert any(event == "open" for event, _ in _touched)


def test_declaring_and_lowering_touch_no_file_and_no_network():
    def build():
        tok = train_tokenizer(
            "tokenizers/never-trained", vocab_size=1000, paths=["/nonexistent/corpus/*.jsonl"]
        )
        return tokenized(
            "tokenized/never-read", paths=["/nonexistent/data/*.jsonl.zst"], tokenizer=tok, sample_count=10
        )

    spec = _declare_and_lower_while_watching(build)
    assert _touched == []
    assert [d.name for d in spec.deps] == ["tokenizers/never-trained"]

    def seed_call():
        return tokenized(
            name="tokenized/tinystories",
            source="roneneldan/TinyStories",
            tokenizer="no-such-org/unknown-tokenizer",
            sample_count=1000,
        )

    spec = _declare_and_lower_while_watching(seed_call)
    assert _touched == []
    assert spec.hash_attrs["input"]["dataset"] == "roneneldan/TinyStories"


def test_every_parameter_and_the_tokenizer_identity_enter_the_key():
    base = dict(name="tokenized/x", source="org/data", tokenizer="gpt2", sample_count=100)
    attrs = lower(tokenized(**base)).hash_attrs
    assert attrs["tokenizer"] == {"spec": "gpt2"}
    assert attrs["input"]["sample_count"] == 100
    variants = [
        dict(tokenizer="other/tokenizer"),
        dict(sample_count=101),
        dict(text_key="body"),
        dict(split="validation"),
        dict(hf_config="en"),
        dict(validation_fraction=0.1),
        dict(bad_records="skip"),
        dict(max_chunk_chars=5000),
        dict(source="org/other"),
    ]
    for change in variants:
        assert lower(tokenized(**(base | change))).hash_attrs != attrs, change
    assert lower(tokenized(**base, zephyr=ZephyrConfig(backend="sync"))).hash_attrs == attrs
    assert lower(tokenized(**base, version="v2")).version == "v2"


def test_equal_handles_lower_to_one_step_and_a_tokenizer_handle_is_a_dependency():
    tok = train_tokenizer("tokenizers/demo", vocab_size=600, source=EMBEDDED_SOURCE, sample_count=50)
    a = tokenized("tokenized/a", source=EMBEDDED_SOURCE, tokenizer=tok, sample_count=10)
    b = tokenized("tokenized/a", source=EMBEDDED_SOURCE, tokenizer=tok, sample_count=10)
    assert a == b and hash(a) == hash(b)
    assert lower(a) is lower(b)
    assert lower(a).deps == (lower(tok),)
    assert lower(a).hash_attrs["tokenizer"] == {"step": "tokenizers/demo"}
    assert lower(tok).hash_attrs["vocab_size"] == 600


def test_local_paths_are_made_absolute_and_hub_ids_kept(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    handle = tokenized("tokenized/local", paths=["./data/*.jsonl"], tokenizer="./tok")
    assert handle.config.input.paths == (f"{tmp_path}/data/*.jsonl",)
    assert handle.tokenizer == f"{tmp_path}/tok"
    assert tokenized("t/hub", source="org/name", tokenizer="org/tok").config.input.source == "org/name"


def test_replacing_a_tokenizer_folders_files_reruns_the_step_naming_the_file(tmp_path):
    import os

    tok = tmp_path / "tok"
    tok.mkdir()
    (tok / "tokenizer.json").write_text('{"version": "1.0"}')
    old = os.stat(tok / "tokenizer.json").st_mtime_ns - 60 * 10**9  # written a minute ago
    os.utime(tok / "tokenizer.json", ns=(old, old))
    runner = StepRunner(prefix=str(tmp_path / "out"), progress=False)
    step = lower(tokenized("tokenized/t", source=EMBEDDED_SOURCE, tokenizer=str(tok), sample_count=10))
    before = runner.plan([step]).of(step).key
    (tok / "tokenizer.json").write_text('{"version": "2.0", "other": 1}')
    again = lower(tokenized("tokenized/t", source=EMBEDDED_SOURCE, tokenizer=str(tok), sample_count=10))
    assert runner.plan([again]).of(again).key != before
    missing = lower(tokenized("tokenized/m", source=EMBEDDED_SOURCE, tokenizer=str(tmp_path / "no-tok")))
    with pytest.raises(StepDefinitionError, match="no-tok/\\*' matches no file"):
        runner.plan([missing])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(source="a/b", paths=["x.jsonl"]), "exactly one of"),
        (dict(source="a/b", sample_count=0), "sample_count"),
        (dict(source="a/b", validation_fraction=1.0), "validation_fraction"),
        (dict(source="a/b", bad_records="ignore"), "bad_records"),
        (dict(source="a/b", tokenizer=3), "tokenizer=3 is an int, expected str or TrainedTokenizer"),
    ],
)
def test_bad_declarations_are_step_definition_errors(kwargs, message):
    kwargs = {"tokenizer": "gpt2"} | kwargs
    with pytest.raises(StepDefinitionError, match=message):
        tokenized("tokenized/bad", **kwargs)


def test_trained_tokenizer_and_tokenized_run_under_the_step_runner_then_cache(tmp_path):
    tok = train_tokenizer("tokenizers/test-bpe", vocab_size=400, source=EMBEDDED_SOURCE, sample_count=300)
    data = tokenized(
        "tokenized/test-stories",
        source=EMBEDDED_SOURCE,
        tokenizer=tok,
        sample_count=120,
        zephyr=ZephyrConfig(backend="sync", quiet=True),
    )
    runner = StepRunner(prefix=str(tmp_path / "prefix"), progress=False)
    result = runner.run([lower(data)])
    cache_path = result.output_path(lower(data))
    tokenizer_path = result.output_path(lower(tok))
    cache = TokenCache.open(cache_path)
    assert cache.split("train").num_documents + cache.split("validation").num_documents == 120
    assert cache.tokenizer_fingerprint == describe_tokenizer(tokenizer_path).fingerprint
    assert cache.vocab_size <= 400

    again = runner.run([lower(data)])
    assert set(again.outcomes.values()) == {"cached"}


def test_marin_tokenizer_is_the_offline_demo_tokenizer_unless_chosen(monkeypatch):
    from experiments.marin_tokenizer import MARIN_HUB_TOKENIZER, marin_demo_tokenizer, select_tokenizer

    assert select_tokenizer(None) is marin_demo_tokenizer
    assert lower(marin_demo_tokenizer).hash_attrs["input"]["name"] == EMBEDDED_SOURCE
    assert select_tokenizer("hub") == MARIN_HUB_TOKENIZER
    assert select_tokenizer("gpt2") == "gpt2"
    seed = tokenized(
        name="tokenized/tinystories",
        source="roneneldan/TinyStories",
        tokenizer=select_tokenizer(None),
        sample_count=1000,
    )
    assert [d.name for d in lower(seed).deps] == ["tokenizers/marin-demo-bpe"]


def _write_docs(path, start, count):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        for i in range(start, start + count):
            f.write(f'{{"text": "document number {i} tells a short story about a cat."}}\n')


def test_tokenized_paths_are_inputs_appending_documents_reruns_naming_the_file(tmp_path):
    data = tmp_path / "data"
    _write_docs(data / "part-0.jsonl", 0, 200)
    _write_docs(data / "part-1.jsonl", 200, 100)
    pattern = str(data / "*.jsonl")
    tok = train_tokenizer("tokenizers/paths", vocab_size=300, paths=[pattern])
    assert lower(tok).inputs == (pattern,)
    handle = tokenized(
        "tokenized/paths",
        paths=[pattern],
        tokenizer=tok,
        validation_fraction=0.0,
        zephyr=ZephyrConfig(backend="sync", quiet=True),
    )
    assert lower(handle).inputs == (pattern,)
    runner = StepRunner(prefix=str(tmp_path / "prefix"), progress=False)
    runner.run([lower(handle)])
    assert {s.state for s in runner.plan([lower(handle)]).steps} == {"cached"}

    size = (data / "part-0.jsonl").stat().st_size
    _write_docs(data / "part-0.jsonl", 1000, 300)
    plan = runner.plan([lower(handle)])
    expected = f"inputs: data/part-0.jsonl changed (size {size} -> {(data / 'part-0.jsonl').stat().st_size})"
    for step in (plan.of(lower(tok)), plan.of(lower(handle))):
        assert step.state == "run: changed"
        assert expected in [str(c) for c in step.changes]

    result = runner.run([lower(handle)])
    cache = TokenCache.open(result.output_path(lower(handle)))
    assert cache.split("train").num_documents == 600


def test_a_hub_source_is_pinned_by_revision_or_marked_unpinned_in_the_plan(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    unpinned = lower(tokenized("tokenized/hub", source="roneneldan/TinyStories", tokenizer="gpt2"))
    pinned = [
        lower(tokenized("tokenized/hub", source="roneneldan/TinyStories", tokenizer="gpt2", revision=rev))
        for rev in ("a" * 40, "b" * 40)
    ]
    runner = StepRunner(prefix=str(tmp_path), progress=False)
    plan = runner.plan([unpinned])
    assert plan.of(unpinned).notes == ("unpinned: roneneldan/TinyStories",)
    keys = {runner.plan([p]).of(p).key for p in pinned}
    assert len(keys) == 2 and plan.of(unpinned).key not in keys
    assert all(runner.plan([p]).of(p).notes == () for p in pinned)
    assert pinned[0].hash_attrs["input"]["revision"] == "a" * 40
    with pytest.raises(StepDefinitionError, match="revision="):
        tokenized("tokenized/embedded", source=EMBEDDED_SOURCE, tokenizer="gpt2", revision="main")


def test_a_hub_source_records_the_revision_it_resolved_from_the_local_cache(tmp_path, monkeypatch):
    from huggingface_hub import constants

    from marin.data.hf_source import resolved_revision

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    refs = tmp_path / "datasets--org--name" / "refs"
    refs.mkdir(parents=True)
    (refs / "main").write_text("c" * 40)
    assert resolved_revision("org/name", None) == "c" * 40
    assert resolved_revision("org/name", "d" * 40) == "d" * 40
    assert resolved_revision("org/missing", None) is None  # offline and not cached: unknown, never a guess


def _offline_hub_dataset(root, monkeypatch, sha: str) -> None:
    """Make `org/tiny` a hub dataset already in the local caches (offline, as a downloaded one is):
    its snapshot `sha` and ref in the hub cache, its prepared split in the datasets cache."""
    import glob

    import datasets
    from datasets.packaged_modules.json.json import Json
    from huggingface_hub import constants

    hub, prepared = root / "hub", root / "datasets"
    snapshot = hub / "datasets--org--tiny" / "snapshots" / sha / "data"
    snapshot.mkdir(parents=True)
    (hub / "datasets--org--tiny" / "refs").mkdir()
    (hub / "datasets--org--tiny" / "refs" / "main").write_text(sha)
    (snapshot / "train.jsonl").write_text(
        "".join(f'{{"text": "Story {i}: a cat sat on a mat and looked at the sun."}}\n' for i in range(12))
    )
    # The datasets cache layout of a hub dataset loaded once: org___tiny/default/0.0.0/<sha>/.
    builder = Json(
        cache_dir=str(prepared),
        dataset_name="tiny",
        data_files={"train": glob.glob(f"{snapshot}/*")},
        hash=sha,
    )
    builder.download_and_prepare()
    (built,) = (prepared / "tiny").iterdir()
    (prepared / "org___tiny").mkdir()
    built.rename(prepared / "org___tiny" / "default")
    for name, value in (
        ("HF_HUB_OFFLINE", "1"),
        ("HF_DATASETS_OFFLINE", "1"),
        ("HF_HUB_CACHE", str(hub)),
        ("HF_DATASETS_CACHE", str(prepared)),
    ):
        monkeypatch.setenv(name, value)  # for step processes
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub))  # for this one, which imported them already
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", prepared)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)


def test_the_resolved_hub_revision_lands_in_the_token_cache_ledger(tmp_path, monkeypatch):
    import json

    sha = "e" * 40
    _offline_hub_dataset(tmp_path / "caches", monkeypatch, sha)
    tok = train_tokenizer("tokenizers/hub-test", vocab_size=300, source=EMBEDDED_SOURCE, sample_count=50)
    handle = tokenized(
        "tokenized/hub",
        source="org/tiny",
        tokenizer=tok,
        sample_count=12,
        zephyr=ZephyrConfig(backend="sync"),
    )
    spec = lower(handle)
    runner = StepRunner(prefix=str(tmp_path / "out"), progress=False)
    assert runner.plan([spec]).of(spec).notes == ("unpinned: org/tiny",)
    result = runner.run([spec])
    out = result.output_path(spec)
    with open(f"{out}/ledger.json") as f:
        ledger = json.load(f)
    assert ledger["source"]["resolved_revision"] == sha  # what the unpinned source resolved to
    assert ledger["source"]["dataset"] == "org/tiny" and "revision" not in ledger["source"]  # unpinned
    assert TokenCache.open(out).split("train").num_documents > 0
