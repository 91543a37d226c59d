"""A zephyr pipeline as a marin step: run by the real StepRunner, it writes under the step's output path."""

from __future__ import annotations

import json
from pathlib import Path

import orjson

from marin.data.zephyr_step import zephyr_step
from marin.execution.context import StepContext, current, running
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
        zephyr_config=ZephyrConfig(backend="processes", num_workers=2, quiet=True),
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
    step = zephyr_step(
        "clean", lower_even, deps=[RAW], zephyr_config=ZephyrConfig(backend="sync", quiet=True)
    )
    context = StepContext("clean", str(out_dir), str(tmp_path), {"raw": str(raw_dir)})
    with running(context):
        first = step.fn()
    (out_dir / first["files"][1]).unlink()
    with running(context):
        second = step.fn()
    # The totals cover every part, the one the first attempt wrote included.
    assert second["shards_resumed"] == 1 and second["records_written_this_attempt"] == 2
    assert second["records_written"] == first["records_written"] == 5
    assert sorted(p.name for p in out_dir.iterdir()) == first["files"]


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
            zephyr_config=ZephyrConfig(backend="sync", quiet=True),
        )
        out_dir = tmp_path / f"clean-{fmt}-{compression}"
        context = StepContext("clean", str(out_dir), str(tmp_path), {"raw": str(raw_dir)})
        with running(context):
            first = step.fn()
        (out_dir / first["files"][1]).unlink()
        with running(context):
            second = step.fn()
        assert (fmt, second["records_written"], second["records_written_this_attempt"]) == (fmt, 5, 2)


def texts_of_even(ctx: StepContext) -> Dataset:
    return lower_even(ctx).map(lambda r: r["text"])
