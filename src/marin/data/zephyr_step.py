"""A marin step whose function runs a zephyr pipeline into the step's output path.

It lives in `marin.data`, the lowest layer that may import both `marin.execution` (StepSpec, the
step context, code fingerprints) and `zephyr` (Dataset, writers): zephyr is a leaf library that knows
nothing of steps, and `marin.execution` never imports zephyr. `marin.experiment` and user code build
on it from above.

    def build(ctx: StepContext) -> Dataset:
        return Dataset.from_files(ctx.path_of(raw_step) + "/*.jsonl.gz").map(clean)

    clean_step = zephyr_step("clean", build, deps=[raw_step], hash_attrs={"min_len": 10})

`zephyr_step` is a frozen dataclass over `PipelineStepConfig` (as `train_lm` is over `TrainConfig`).
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
from dataclasses import KW_ONLY, dataclass, fields
from typing import Any, ClassVar

from marin.data.sources import SourceError
from marin.execution.arguments import Checked
from marin.execution.cache_key import code_fingerprint
from marin.execution.context import StepContext, current
from marin.execution.lazy import LazyStep, StepOptions, lower
from marin.execution.step_spec import StepSpec
from storage import glob, open_read, read_chunks
from zephyr import Dataset, PlanError, ZephyrConfig
from zephyr.io import WriteSpec, read_part_stats


@dataclass(frozen=True)
class PipelineStepConfig(Checked):
    """What a zephyr step runs: `build(context) -> Dataset`, written in `format` under `subdir` of the output.

    `format` is "jsonl", "text" or "parquet"; `compression` "zstd", "gzip" or None. `zephyr` (backend,
    workers, ...) is how it runs, not what it computes, and is not part of the key. A pipeline that
    writes no record fails the step, unless `allow_empty=True` (not part of the key either).
    """

    build: Callable[[StepContext], Dataset]
    _: KW_ONLY
    format: str = "jsonl"
    compression: str | None = None
    subdir: str = ""
    zephyr: ZephyrConfig | None = None
    allow_empty: bool = False


@dataclass(frozen=True, eq=False)
class ZephyrStep(PipelineStepConfig, StepOptions):
    """A step that builds a Dataset with `build(current step context)` and writes it to the step's output.

    `zephyr_step` is this class: `name`, `build`, then by keyword the `PipelineStepConfig` fields, the
    `StepOptions` (version, adopt, resources) and the step's own wiring below. `build` must be a
    module-level function (it travels by pickle); its code fingerprint, the output format,
    compression and subdir join `hash_attrs` in the cache key, so editing the pipeline re-runs the
    step. `deps` are the steps (or handles) whose outputs `build` reads through `ctx.path_of`.
    `inputs` (paths, globs, fsspec URLs) are the raw files `build` reads, whose contents join the
    key; `adopt` takes an existing non-empty folder at `output_path` as the output without running.
    The step's `.artifact.json` records the part files and record counts. Handles of this class
    compare by identity, as StepSpecs do.
    """

    helper: ClassVar[str] = "zephyr_step"
    _: KW_ONLY
    deps: Sequence[StepSpec | LazyStep] = ()
    hash_attrs: Mapping[str, Any] | None = None
    output_path: str | None = None
    inputs: Sequence[str] = ()

    def __post_init__(self) -> None:
        WriteSpec(self.format, "unused", self.compression)  # fail now, at declaration, on a bad format
        if not callable(self.build):
            raise PlanError(
                f"step {self.name!r}: build must be a function (context) -> Dataset, got {self.build!r}"
            )
        object.__setattr__(self, "subdir", self.subdir.strip("/"))
        object.__setattr__(self, "deps", tuple(self.deps))
        object.__setattr__(self, "inputs", tuple(self.inputs))

    @functools.cached_property
    def config(self) -> PipelineStepConfig:
        """What the step's function reads."""
        return PipelineStepConfig(**{f.name: getattr(self, f.name) for f in fields(PipelineStepConfig)})

    def to_step_spec(self) -> StepSpec:
        build = self.build
        attrs = dict(self.hash_attrs or {})
        attrs["zephyr"] = {
            "build": build.__qualname__,  # never the module: its import name differs between `marin run` and an import
            "build_code": code_fingerprint(build),
            "format": self.format,
            "compression": self.compression,
            "subdir": self.subdir,
        }
        return StepSpec(
            fn=functools.partial(run_pipeline_step, self.config),
            deps=tuple(lower(d) for d in self.deps),
            hash_attrs=attrs,
            output_path=self.output_path,
            inputs=self.inputs,
            resumable=True,  # part files are written atomically; a rerun keeps them (skip_existing)
            **self.spec_options(),
        )


zephyr_step = ZephyrStep


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
    if not summary["records_written"] and not config.allow_empty:
        raise SourceError(
            f"step {context.step_name!r}: its pipeline wrote 0 records to {out}; check what build() reads "
            "(paths, filters), or pass allow_empty=True to accept an empty output"
        )
    summary["headline"] = {"metric": "records", "value": summary["records_written"]}
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
