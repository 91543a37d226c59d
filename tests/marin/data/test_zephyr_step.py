"""A zephyr pipeline as a marin step: run by the real StepRunner, it writes under the step's output path."""

from __future__ import annotations

import json
from pathlib import Path

import orjson

from marin.data.zephyr_step import zephyr_step
from marin.execution.context import StepContext, current, running
from marin.execution.lazy import lower
from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec
from zephyr import Dataset, ZephyrConfig


def write_raw() -> dict:
    out = Path(current().output_path)
    out.mkdir(parents=True, exist_ok=True)
    for f in range(2):
        rows = [{"id": i, "text": f"Text {i}"} for i in range(f * 5, f * 5 + 5)]
        (out / f"raw-{f}.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return {"files": 2}


def lower_even(ctx: StepContext) -> Dataset:
    raw = ctx.path_of("raw")
    return (
        Dataset.from_files(f"{raw}/*.jsonl")
        .filter(lambda r: r["id"] % 2 == 0)
        .map(lambda r: {"id": r["id"], "text": r["text"].lower()})
    )


RAW = StepSpec(name="raw", fn=write_raw, hash_attrs={"rows": 10})


def test_zephyr_step_writes_into_its_output_path_and_records_the_parts(tmp_path: Path):
    step = zephyr_step(
        "clean",
        lower_even,
        deps=[RAW],
        compression="zstd",
        zephyr=ZephyrConfig(backend="processes", num_workers=2, quiet=True),
    )
    runner = StepRunner(prefix=str(tmp_path), progress=False)
    result = runner.run([step])
    out = Path(result.output_path(step))
    parts = sorted(p.name for p in out.glob("part-*"))
    assert parts == ["part-00000-of-00002.jsonl.zst", "part-00001-of-00002.jsonl.zst"]
    records = Dataset.from_files(str(out / "part-*")).collect(backend="sync", quiet=True)
    assert records == [{"id": i, "text": f"text {i}"} for i in (0, 2, 4, 6, 8)]
    artifact = json.loads((out / ".artifact.json").read_text())
    assert "part-00000-of-00002.jsonl.zst" in json.dumps(artifact)
    assert runner.run([step]).outcomes[str(out)] == "cached"


def test_step_fn_resumes_a_half_written_output(tmp_path: Path):
    raw_dir, out_dir = tmp_path / "raw", tmp_path / "clean"
    with running(StepContext("raw", str(raw_dir), str(tmp_path))):
        write_raw()
    step = zephyr_step("clean", lower_even, deps=[RAW], zephyr=ZephyrConfig(backend="sync", quiet=True))
    context = StepContext("clean", str(out_dir), str(tmp_path), {"raw": str(raw_dir)})
    with running(context):
        first = lower(step).fn()
    (out_dir / first["files"][1]).unlink()
    with running(context):
        second = lower(step).fn()
    # The totals cover every part, the one the first attempt wrote included.
    assert second["shards_resumed"] == 1 and second["records_written_this_attempt"] == 2
    assert second["records_written"] == first["records_written"] == 5
    assert sorted(p.name for p in out_dir.glob("part-*")) == first["files"]


def test_resumed_totals_count_earlier_parts_in_every_format(tmp_path: Path):
    raw_dir = tmp_path / "raw"
    with running(StepContext("raw", str(raw_dir), str(tmp_path))):
        write_raw()
    for fmt, compression in (("jsonl", "zstd"), ("jsonl", "gzip"), ("text", None), ("parquet", None)):
        build = lower_even if fmt != "text" else texts_of_even
        step = zephyr_step(
            "clean",
            build,
            deps=[RAW],
            format=fmt,
            compression=compression,
            zephyr=ZephyrConfig(backend="sync", quiet=True),
        )
        out_dir = tmp_path / f"clean-{fmt}-{compression}"
        context = StepContext("clean", str(out_dir), str(tmp_path), {"raw": str(raw_dir)})
        with running(context):
            first = lower(step).fn()
        (out_dir / first["files"][1]).unlink()
        with running(context):
            second = lower(step).fn()
        assert (fmt, second["records_written"], second["records_written_this_attempt"]) == (fmt, 5, 2)


def texts_of_even(ctx: StepContext) -> Dataset:
    return lower_even(ctx).map(lambda r: r["text"])


def _write_aged(path: Path, text: str) -> None:
    """Write a file dated a minute ago: data written earlier, not racing the plan's stat cache."""
    import os

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    when = os.stat(path).st_mtime_ns - 60 * 10**9
    os.utime(path, ns=(when, when))


def _raw_with_bad_lines(raw: Path) -> None:
    """Two files: ids 0-4 with one malformed line, ids 5-9 with two."""
    good = [[orjson.dumps({"id": i}).decode() for i in range(f * 5, f * 5 + 5)] for f in range(2)]
    _write_aged(raw / "raw-0.jsonl", "\n".join(good[0][:2] + ["{not json"] + good[0][2:]) + "\n")
    _write_aged(raw / "raw-1.jsonl", "\n".join(["{bad", *good[1], "also bad"]) + "\n")


def keep_all_failing_once(ctx: StepContext) -> Dataset:
    """Every record of the raw files in $ZEPHYR_STEP_TEST_RAW (the test's tmp dir); the record with
    id 7 (in the second shard) fails until the flag file beside them exists, so a first attempt
    dies after writing the first part."""
    import os

    raw = os.environ["ZEPHYR_STEP_TEST_RAW"]

    def check(record):
        if record["id"] == 7 and not os.path.exists(f"{raw}/flag"):
            raise RuntimeError("the first attempt dies here")
        return record

    return Dataset.from_files(f"{raw}/*.jsonl", bad_records="skip").map(check)


def test_resumed_step_reports_bad_records_over_every_attempt(tmp_path: Path, monkeypatch):
    from marin.execution.errors import StepFailedError

    raw = tmp_path / "raw"
    _raw_with_bad_lines(raw)
    monkeypatch.setenv("ZEPHYR_STEP_TEST_RAW", str(raw))
    step = zephyr_step(
        "clean",
        keep_all_failing_once,
        inputs=(f"{raw}/*.jsonl",),
        zephyr=ZephyrConfig(backend="sync", quiet=True, max_retries=0),
    )
    runner = StepRunner(prefix=str(tmp_path / "out"), progress=False)
    try:
        runner.run([step])
    except StepFailedError:
        pass
    else:
        raise AssertionError("the first attempt should have failed at id 7")
    (raw / "flag").write_text("go")
    result = runner.run([step], force_run_failed=True)
    out = Path(result.output_path(step))
    artifact = json.loads((out / ".artifact.json").read_text())["result"]
    # The first attempt wrote part 0 (1 bad line skipped); the second wrote part 1 (2 bad lines).
    assert artifact["shards_resumed"] == 1
    assert (artifact["bad_records"], artifact["bad_records_this_attempt"]) == (3, 2)
    assert (artifact["records_written"], artifact["records_written_this_attempt"]) == (10, 5)
    assert "parts_without_bad_record_counts" not in artifact


def test_declared_inputs_rerun_the_step_when_a_raw_file_changes(tmp_path: Path, monkeypatch):
    raw = tmp_path / "raw"
    _raw_with_bad_lines(raw)
    (raw / "flag").write_text("go")
    monkeypatch.setenv("ZEPHYR_STEP_TEST_RAW", str(raw))
    step = zephyr_step(
        "clean",
        keep_all_failing_once,
        inputs=(f"{raw}/*.jsonl",),
        zephyr=ZephyrConfig(backend="sync", quiet=True),
    )
    runner = StepRunner(prefix=str(tmp_path / "out"), progress=False)
    runner.run([step])
    assert runner.plan([step]).of(step).state == "cached"
    size = (raw / "raw-1.jsonl").stat().st_size
    appended = '{"id": 10}\n'
    with open(raw / "raw-1.jsonl", "a") as f:
        f.write(appended)
    planned = runner.plan([step]).of(step)
    assert planned.state == "run: changed"
    assert [str(c) for c in planned.changes] == [
        f"inputs: raw/raw-1.jsonl changed (size {size} -> {size + len(appended)})"
    ]


def test_adopt_takes_an_existing_folder_without_running_the_pipeline(tmp_path: Path):
    prefix = tmp_path / "out"
    existing = prefix / "curated" / "v0"
    existing.mkdir(parents=True)
    (existing / "part-00000-of-00001.jsonl").write_text('{"id": 1}\n')
    step = zephyr_step(
        "curated",
        never_built,
        output_path="curated/v0",
        adopt=True,
        zephyr=ZephyrConfig(backend="sync", quiet=True),
    )
    StepRunner(prefix=str(prefix), progress=False).run([step])
    info = json.loads((existing / ".executor_info").read_text())
    assert info["adopted"] is True
    assert [f["path"] for f in info["manifest"]] == ["part-00000-of-00001.jsonl"]
    assert (existing / "part-00000-of-00001.jsonl").read_text() == '{"id": 1}\n'


def never_built(ctx: StepContext) -> Dataset:
    raise AssertionError("an adopted step must not run its pipeline")
