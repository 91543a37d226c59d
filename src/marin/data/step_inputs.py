"""Steps and handles as the input of `tokenized()` / `train_tokenizer()` (`source=` or items of `paths=`).

At declaration each becomes a `step:NAME` placeholder in the source's paths plus a dependency; at
run time `run_with_step_inputs` replaces the placeholders by the data files that dependency wrote.
It sits in `marin.data`, below both users: `marin.experiment` (tokenized(), train_tokenizer()) and
`marin.curation` (whose inputs may be steps too).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from marin.data.sources import SourceConfig
from marin.execution.errors import MarinError, StepDefinitionError
from marin.execution.lazy import LazyStep, lower
from marin.execution.step_spec import StepSpec

STEP_INPUT_PREFIX = "step:"
STEP_DATA_PATTERNS = ("**/*.jsonl", "**/*.jsonl.gz", "**/*.jsonl.zst", "**/*.parquet")


def is_step(value: Any) -> bool:
    return isinstance(value, (StepSpec, LazyStep)) and not isinstance(value, str)


def split_step_inputs(name: str, source, paths) -> tuple[Any, Any, tuple]:
    """Turn steps and handles in `source=` / `paths=` into `step:NAME` placeholders plus dependencies.

    A placeholder is replaced at run time by the data files of that dependency's output
    (`resolve_step_inputs`); anything that is neither a path string nor a step is an error here.
    """
    steps: list = []

    def placeholder(value: Any, where: str) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, os.PathLike):
            return os.fspath(value)
        if is_step(value):
            steps.append(value)
            return STEP_INPUT_PREFIX + lower(value).name
        raise StepDefinitionError(
            f"step {name!r}: {where} must be a path string, a StepSpec or a step handle (tokenized(), "
            f"curation helpers, ...), got {type(value).__name__} {value!r:.80}"
        )

    if is_step(source):
        if paths is not None:
            raise StepDefinitionError(f"step {name!r}: give exactly one of source= or paths=")
        return None, (placeholder(source, "source"),), tuple(steps)
    if source is not None and not isinstance(source, str):
        source = placeholder(source, "source")  # a path-like becomes its string; anything else fails
    if isinstance(paths, os.PathLike):
        paths = [paths]  # one path (unlike a str, a Path is never mistaken for a list of characters)
    if paths is not None and not isinstance(paths, str):
        if is_step(paths):
            paths = [paths]
        paths = tuple(placeholder(p, f"paths[{i}]") for i, p in enumerate(paths))
    return source, paths, tuple(steps)


def step_output_files(step_name: str) -> list[str]:
    """The data files (.jsonl(.gz|.zst), .parquet, any depth) a dependency of the running step wrote.

    Files under a folder whose name starts with "_" are the step's side outputs, not its data (a
    curation step's `_rejected/` documents), and are left out.
    """
    import storage
    from marin.execution.context import current

    root = current().path_of(step_name)
    files: set[str] = set()
    for pattern in STEP_DATA_PATTERNS:
        files.update(
            f
            for f in storage.glob(f"{root}/{pattern}")
            if not any(part.startswith("_") for part in f[len(root) :].strip("/").split("/")[:-1])
        )
    if not files:
        raise MarinError(f"input step {step_name!r} wrote no .jsonl(.gz|.zst) or .parquet files under {root}")
    return sorted(files)


def resolve_step_inputs(config: SourceConfig) -> SourceConfig:
    """Replace `step:NAME` placeholders by the data files that dependency wrote (run time only)."""
    if not config.paths or not any(p.startswith(STEP_INPUT_PREFIX) for p in config.paths):
        return config
    resolved: list[str] = []
    for p in config.paths:
        if p.startswith(STEP_INPUT_PREFIX):
            resolved.extend(step_output_files(p[len(STEP_INPUT_PREFIX) :]))
        else:
            resolved.append(p)
    return dataclasses.replace(config, paths=tuple(resolved))


def run_with_step_inputs(run, config, output_path: str):
    """Call `run(config, output_path)` with the step placeholders of `config.input` resolved."""
    return run(dataclasses.replace(config, input=resolve_step_inputs(config.input)), output_path)


def declared_inputs(config: SourceConfig) -> tuple[str, ...]:
    """`config.inputs()` without the `step:NAME` placeholders: a step input enters the key through its
    dependency's key, not as files."""
    return tuple(p for p in config.inputs() if not p.startswith(STEP_INPUT_PREFIX))
