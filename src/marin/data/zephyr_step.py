"""A marin step whose function runs a zephyr pipeline into the step's output path.

It lives in `marin.data`, the lowest layer that may import both `marin.execution` (StepSpec, the
step context, code fingerprints) and `zephyr` (Dataset, writers): zephyr is a leaf library that knows
nothing of steps, and `marin.execution` never imports zephyr. `marin.experiment` and user code build
on it from above.

    def build(ctx: StepContext) -> Dataset:
        return Dataset.from_files(ctx.path_of(raw_step) + "/*.jsonl.gz").map(clean)

    clean_step = zephyr_step("clean", build, deps=[raw_step], hash_attrs={"min_len": 10})

The step's `fn` is a module-level function bound with functools.partial to a frozen config, so it
pickles to whatever process or Ray worker the runner places it on. A re-run after a crash resumes
the write: finished part files are kept (skip_existing), and the artifact's `records_written` and
`bad_records` are totals over every attempt: a kept part's counts are read from the stats zephyr
writes beside it (`zephyr.io.read_part_stats`); a part without them (written by an older zephyr)
has its records counted from the file, and is named in `parts_without_bad_record_counts`.

`inputs=` declares the raw files `build` reads, so that changing them reruns the step (see
`marin.execution.inputs`); `adopt=True` takes an existing folder at the output path as the step's
output (see `StepSpec`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from marin.execution.cache_key import code_fingerprint
from marin.execution.context import StepContext, current
from marin.execution.step_spec import StepSpec
from storage import glob, open_read, read_chunks
from zephyr import Dataset, PlanError, ZephyrConfig
from zephyr.io import WriteSpec, read_part_stats

if TYPE_CHECKING:
    from fray.cluster import ResourceConfig


@dataclass(frozen=True)
class PipelineStepConfig:
    """What a zephyr step runs: `build(context) -> Dataset`, written in `format` under `subdir` of the output."""

    build: Callable[[StepContext], Dataset]
    format: str = "jsonl"
    compression: str | None = None
    subdir: str = ""
    zephyr: ZephyrConfig | None = None


def zephyr_step(
    name: str,
    build: Callable[[StepContext], Dataset],
    *,
    deps: Sequence[StepSpec] = (),
    hash_attrs: Mapping[str, Any] | None = None,
    format: str = "jsonl",
    compression: str | None = None,
    subdir: str = "",
    output_path: str | None = None,
    version: str | None = None,
    resources: ResourceConfig | None = None,
    zephyr_config: ZephyrConfig | None = None,
    inputs: Sequence[str] = (),
    adopt: bool = False,
) -> StepSpec:
    """A StepSpec that builds a Dataset with `build(current step context)` and writes it to the step's output.

    `build` must be a module-level function (it travels by pickle); its code fingerprint, the output
    format and compression join `hash_attrs` in the cache key, so editing the pipeline re-runs the
    step. `zephyr_config` (backend, workers, ...) is how it runs, not what it computes, and is not
    part of the key. The step's `.artifact.json` records the part files and record counts.
    `inputs` (paths, globs, fsspec URLs) are the raw files `build` reads, whose contents join the
    key; `adopt` takes an existing non-empty folder at `output_path` as the output without running.
    """
    WriteSpec(format, "unused", compression)  # fail now, at declaration, on a bad format or compression
    if not callable(build):
        raise PlanError(f"step {name!r}: build must be a function (context) -> Dataset, got {build!r}")
    config = PipelineStepConfig(build, format, compression, subdir.strip("/"), zephyr_config)
    attrs = dict(hash_attrs or {})
    attrs["zephyr"] = {
        "build": build.__qualname__,  # never the module: its import name differs between `marin run` and an import
        "build_code": code_fingerprint(build),
        "format": format,
        "compression": compression,
        "subdir": config.subdir,
    }
    return StepSpec(
        name=name,
        fn=functools.partial(run_pipeline_step, config),
        deps=deps,
        hash_attrs=attrs,
        output_path=output_path,
        version=version,
        resources=resources,
        inputs=inputs,
        adopt=adopt,
        resumable=True,  # part files are written atomically; a rerun keeps them (skip_existing)
    )


def run_pipeline_step(config: PipelineStepConfig) -> dict[str, Any]:
    """The step function: build the pipeline in the running step's context and write it out."""
    context = current()
    dataset = config.build(context)
    if not isinstance(dataset, Dataset):
        raise PlanError(
            f"step {context.step_name!r}: build() returned {type(dataset).__name__}, not a zephyr Dataset"
        )
    out = context.output_path.rstrip("/") + (f"/{config.subdir}" if config.subdir else "")
    options: dict[str, Any] = {"skip_existing": True, "config": config.zephyr}
    already = _part_names(out)  # finished by an earlier attempt: skip_existing keeps them
    if config.format == "parquet":
        result = dataset.write_parquet(out, **options)
    elif config.format == "text":
        result = dataset.write_text(out, compression=config.compression, **options)
    else:
        result = dataset.write_jsonl(out, compression=config.compression, **options)
    prefix = context.output_path.rstrip("/") + "/"
    earlier_records = earlier_bad = 0
    uncounted: list[str] = []
    for part in (p for p in result.paths if p.rsplit("/", 1)[-1] in already):
        stats = read_part_stats(part)
        if stats is None:  # written before zephyr kept counts: its records are in the file, its bad ones lost
            earlier_records += count_records(part, config.format)
            uncounted.append(part.removeprefix(prefix))
        else:
            earlier_records += stats.records
            earlier_bad += stats.bad_records
    summary: dict[str, Any] = {
        "files": [p.removeprefix(prefix) for p in result.paths],
        "records_written": result.records_written + earlier_records,
        "records_written_this_attempt": result.records_written,
        "bad_records": result.bad_records + earlier_bad,
        "bad_records_this_attempt": result.bad_records,
        "shards_resumed": result.shards_skipped,
    }
    if uncounted:
        summary["parts_without_bad_record_counts"] = uncounted
    return summary


def _part_names(directory: str) -> set[str]:
    return {p.rsplit("/", 1)[-1] for p in glob(f"{directory.rstrip('/')}/part-*")}


def count_records(path: str, format: str) -> int:
    """The records in one part file this step wrote: Parquet rows, or lines of JSONL / text."""
    if format == "parquet":
        import pyarrow.parquet as pq

        with open_read(path) as stream:
            return pq.ParquetFile(stream).metadata.num_rows
    lines, last = 0, b"\n"
    with open_read(path) as stream:
        for chunk in read_chunks(stream):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    return lines + (last != b"\n")
