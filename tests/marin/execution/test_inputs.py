"""Declared inputs: a step reruns when the files it reads change, and only then."""

import os
import time

import orjson
import pytest

from marin.execution.errors import StepDefinitionError
from marin.execution.inputs import RACY_NS, STAT_CACHE
from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec


def _count_lines(patterns):
    def fn(output_path):
        return {"ok": True}

    return fn


def _write(path, text, age_s=10.0):
    """Write a file and date it `age_s` in the past (data written earlier, not racing the plan)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    when = os.stat(path).st_mtime_ns - int(age_s * 1e9)
    os.utime(path, ns=(when, when))


def _step(raw_dir):
    return StepSpec(name="curate", fn=_count_lines(None), inputs=(f"{raw_dir}/*.jsonl",))


def _plan(prefix, spec):
    return StepRunner(prefix=str(prefix), progress=False).plan([spec]).of(spec)


def _run(prefix, spec):
    StepRunner(prefix=str(prefix), progress=False).run([spec])


@pytest.fixture
def data(tmp_path):
    raw = tmp_path / "data" / "raw"
    _write(raw / "a.jsonl", '{"text": "one"}\n' * 3)
    _write(raw / "b.jsonl", '{"text": "two"}\n')
    time.sleep(RACY_NS / 1e9 + 0.05)  # let the files age past the window in which a stat is not trusted
    return raw


def test_appending_to_an_input_reruns_the_step_naming_the_file(tmp_path, data):
    prefix = tmp_path / "out"
    _run(prefix, _step(data))
    assert _plan(prefix, _step(data)).state == "cached"
    size = os.path.getsize(data / "a.jsonl")
    with open(data / "a.jsonl", "a") as f:
        f.write('{"text": "appended"}\n')
    planned = _plan(prefix, _step(data))
    assert planned.state == "run: changed"
    assert [str(c) for c in planned.changes] == [
        f"inputs: raw/a.jsonl changed (size {size} -> {os.path.getsize(data / 'a.jsonl')})"
    ]


def test_adding_or_removing_an_input_reruns_the_step_naming_the_file(tmp_path, data):
    prefix = tmp_path / "out"
    _run(prefix, _step(data))
    _write(data / "c.jsonl", '{"text": "three"}\n')
    planned = _plan(prefix, _step(data))
    assert planned.state == "run: changed"
    assert [str(c) for c in planned.changes] == ["inputs: raw/c.jsonl added"]
    _run(prefix, _step(data))
    (data / "b.jsonl").unlink()
    planned = _plan(prefix, _step(data))
    assert planned.state == "run: changed"
    assert [str(c) for c in planned.changes] == ["inputs: raw/b.jsonl removed"]


def test_same_size_new_content_reruns_and_touching_keeps_it_cached(tmp_path, data):
    prefix = tmp_path / "out"
    _run(prefix, _step(data))
    os.utime(data / "a.jsonl")  # same bytes, new mtime
    assert _plan(prefix, _step(data)).state == "cached"
    _write(data / "b.jsonl", '{"text": "TWO"}\n')  # same size, other bytes, mtime in the past again
    planned = _plan(prefix, _step(data))
    assert planned.state == "run: changed"
    assert [str(c) for c in planned.changes] == ["inputs: raw/b.jsonl changed (same size, new content)"]


def test_moving_the_data_keeps_the_key(tmp_path, data):
    moved = tmp_path / "elsewhere" / "raw"
    moved.parent.mkdir()
    before = _plan(tmp_path / "out", _step(data)).key
    os.rename(data, moved)
    assert _plan(tmp_path / "out", _step(moved)).key == before


def test_an_unchanged_file_is_not_rehashed_and_a_changed_stat_always_is(tmp_path, data):
    prefix = tmp_path / "out"
    _run(prefix, _step(data))
    _plan(prefix, _step(data))
    cache_path = prefix / STAT_CACHE
    cache = orjson.loads(cache_path.read_bytes())
    entry = cache["files"][str(data / "a.jsonl")]
    assert entry[:2] == [os.path.getsize(data / "a.jsonl"), os.stat(data / "a.jsonl").st_mtime_ns]
    # Planting another digest under the file's exact stat shows the plan trusts the stat (no read) ...
    entry[4] = "xxh3_128:planted"
    cache_path.write_bytes(orjson.dumps(cache))
    assert _plan(prefix, _step(data)).state == "run: changed"
    # ... and once the stat differs (a touch), the file is read again: its real digest is back.
    os.utime(data / "a.jsonl")
    assert _plan(prefix, _step(data)).state == "cached"


def test_a_file_modified_just_now_is_never_trusted_from_the_stat_cache(tmp_path, data):
    prefix = tmp_path / "out"
    _run(prefix, _step(data))
    (data / "a.jsonl").write_text('{"text": "new"}\n' * 3)  # mtime now: within the racy window
    _plan(prefix, _step(data))
    cache = orjson.loads((prefix / STAT_CACHE).read_bytes())["files"]
    assert str(data / "a.jsonl") not in cache
    assert str(data / "b.jsonl") in cache


def test_a_pattern_that_matches_nothing_is_an_error_naming_step_and_pattern(tmp_path):
    spec = StepSpec(name="curate", fn=_count_lines(None), inputs=(f"{tmp_path}/none/*.jsonl",))
    with pytest.raises(StepDefinitionError, match=r"step 'curate': input .*none/\*\.jsonl.* matches no file"):
        _plan(tmp_path / "out", spec)
    with pytest.raises(StepDefinitionError, match="wrap it in a list"):
        StepSpec(name="curate", fn=_count_lines(None), inputs="data/*.jsonl")


def test_fsspec_inputs_are_part_of_the_key(tmp_path):
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe("/marin-inputs-test/raw/x.parquet", b"abc")
    spec = StepSpec(
        name="remote", fn=_count_lines(None), inputs=("memory://marin-inputs-test/raw/*.parquet",)
    )
    prefix = tmp_path / "out"
    _run(prefix, spec)
    assert _plan(prefix, spec).state == "cached"
    fs.pipe("/marin-inputs-test/raw/x.parquet", b"abcd")
    planned = _plan(prefix, spec)
    assert [str(c) for c in planned.changes] == ["inputs: raw/x.parquet changed (size 3 -> 4)"]
    fs.rm("/marin-inputs-test", recursive=True)


def test_hub_inputs_unpinned_are_marked_and_a_pinned_revision_is_part_of_the_key(tmp_path):
    unpinned = StepSpec(name="hub", fn=_count_lines(None), inputs=("hf://datasets/roneneldan/TinyStories",))
    planned = _plan(tmp_path, unpinned)
    assert planned.notes == ("unpinned: roneneldan/TinyStories",)
    assert "unpinned: roneneldan/TinyStories" in orjson.dumps(planned.to_json()).decode()
    pinned = [
        StepSpec(name="hub", fn=_count_lines(None), inputs=(f"hf://datasets/roneneldan/TinyStories@{rev}",))
        for rev in ("a" * 40, "b" * 40)
    ]
    keys = [_plan(tmp_path, p).key for p in pinned]
    assert keys[0] != keys[1] and planned.key not in keys
    assert _plan(tmp_path, pinned[0]).notes == ()


def test_explain_lists_the_declared_input_files_of_an_output(tmp_path, data):
    from marin.execution.explain import explain_output

    prefix = tmp_path / "out"
    spec = _step(data)
    _run(prefix, spec)
    text = explain_output(_plan(prefix, spec).output_path)
    assert "inputs   2 declared files" in text
    assert f"raw/a.jsonl  {os.path.getsize(data / 'a.jsonl')} B  xxh3_128:" in text
