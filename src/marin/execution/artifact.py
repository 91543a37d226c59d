"""Provenance records written into each step's output directory.

- `.executor_info` (`ExecutorInfo`): how the output was made: the step's name, key and key record
  (hash_attrs, version or code fingerprint, dependencies with their keys), the dependencies' paths,
  `fn` as module:qualname, git commit and dirty flag of `fn`'s repository and of the experiment's
  (with the experiment repository's path and its capped `git diff HEAD` when dirty), the experiment
  file and its sha256, the command line, Python and every installed distribution's version, host,
  user, start and end times, and resources (see `marin.execution.run_provenance`).
- `.artifact.json` (`ArtifactRecord`): what the step produced: its returned value and a manifest of
  its files, each with its size and xxh3-128 digest (`marin verify` re-checks it; see
  `marin.execution.manifest`).

Both are plain writes: they are trusted only once `.executor_status` says SUCCESS, which is
written after them, atomically.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import msgspec

import storage
from marin.execution.errors import StepDefinitionError
from marin.execution.lease import is_lease_file
from marin.execution.manifest import build_manifest
from marin.execution.records import JsonRecord, read_typed
from marin.execution.status import STATUS_FILE, is_status_temp
from marin.execution.step_spec import check_json_value

if TYPE_CHECKING:
    from fray.cluster import ResourceConfig

INFO_FILE = ".executor_info"
ARTIFACT_FILE = ".artifact.json"
LOG_FILE = ".executor_log"
RECORD_FILES = frozenset({INFO_FILE, ARTIFACT_FILE, STATUS_FILE, LOG_FILE})


class DepRecord(msgspec.Struct, frozen=True):
    """A dependency of a step as its `.executor_info` records it."""

    name: str
    key: str
    path: str


class ExecutorInfo(JsonRecord, frozen=True, kw_only=True):
    """The parsed `.executor_info`: how an output was made. Every field but `name` and `key` may be
    missing from a record (it reads as its default); `adopted` and `manifest` are written only for
    an adopted folder."""

    name: str
    key: str
    key_record: dict[str, Any] | None = None  # what the key hashes (see `marin.execution.cache_key`)
    hash_attrs: dict[str, Any] | None = None
    version: str | None = None
    code_fingerprint: str | None = None
    deps: tuple[DepRecord, ...] = ()
    fn: str | None = None
    git: dict[str, Any] | None = None
    environment: dict[str, Any] | None = None
    output_path: str | None = None
    prefix: str | None = None
    start_time: float | None = None
    end_time: float | None = None
    duration_s: float | None = None
    resources: dict[str, Any] | str | None = None  # the step's ResourceConfig as JSON
    adopted: bool | msgspec.UnsetType = msgspec.UNSET
    manifest: list[dict[str, Any]] | msgspec.UnsetType = msgspec.UNSET
    experiment: dict[str, Any] | None = None  # the experiment file and its sha256
    command_line: dict[str, Any] | None = None


class ArtifactRecord(JsonRecord, frozen=True, kw_only=True):
    """The parsed `.artifact.json`: the step's returned value and the manifest of its files."""

    result: Any = None
    files: list[dict[str, Any]] = msgspec.field(default_factory=list)  # path, size, digest
    total_bytes: int = 0


def is_record_file(name: str) -> bool:
    """Whether a top-level file name in an output directory is one of the engine's records."""
    return name in RECORD_FILES or is_lease_file(name) or is_status_temp(name)


def is_output_file(rel: str) -> bool:
    """Whether a path relative to an output directory is an output file (not one of the engine's records)."""
    return "/" in rel or not is_record_file(rel)


def fn_reference(fn: Callable[..., Any]) -> str:
    """`module:qualname` of a step function (a partial names its function)."""
    target = fn.func if isinstance(fn, functools.partial) else fn
    module = getattr(target, "__module__", None) or type(target).__module__
    qualname = getattr(target, "__qualname__", None) or type(target).__qualname__
    return f"{module}:{qualname}" + (" (partial)" if isinstance(fn, functools.partial) else "")


def to_jsonable(result: Any, step: str) -> Any:
    """The step's return value as JSON: None, a dict of JSON values, or a dataclass (as a dict)."""
    if result is None:
        return None
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        result = dataclasses.asdict(result)
    if not isinstance(result, Mapping):
        raise StepDefinitionError(
            f"step {step!r} returned a {type(result).__name__}; a step returns None, a dict of JSON values "
            "or a dataclass, which is stored in .artifact.json"
        )
    check_json_value(result, f"step {step!r}: returned value")
    return dict(result)


def resources_json(resources: ResourceConfig | None) -> dict[str, Any] | str | None:
    """A JSON form of a step's ResourceConfig (None when it asked for nothing)."""
    if resources is None:
        return None
    if hasattr(resources, "to_json"):
        return resources.to_json()
    if dataclasses.is_dataclass(resources):
        return dataclasses.asdict(resources)
    return repr(resources)


def manifest(output_path: str, entries: Iterable[tuple[str, int]] | None = None) -> list[dict[str, Any]]:
    """Every output file (not the engine's records) with its size and xxh3-128 digest, sorted by path;
    `entries` is the folder's listing when the caller has just taken it (see `build_manifest`)."""
    return build_manifest(output_path, is_output_file, entries)


def write_records(
    output_path: str, info: ExecutorInfo, result: Any, entries: Iterable[tuple[str, int]] | None = None
) -> None:
    """Write `.executor_info` and `.artifact.json` (with the manifest of `entries`, else of a fresh
    listing); the status, written after, makes them valid. Off local disk the two writes go out at
    once (two round trips overlapped)."""
    files = manifest(output_path, entries)
    artifact = ArtifactRecord(result=result, files=files, total_bytes=sum(f["size"] for f in files))
    storage.write_many(
        [
            (f"{output_path}/{INFO_FILE}", info.to_bytes()),
            (f"{output_path}/{ARTIFACT_FILE}", artifact.to_bytes()),
        ]
    )


def read_info(output_path: str, strict: bool = False) -> ExecutorInfo | None:
    """The `.executor_info` of an output, or None when it has none; an unreadable one (see
    `records.read_record`, or not an info record) reads as None, or with `strict` raises
    UnreadableRecordError naming it."""
    return read_typed(f"{output_path}/{INFO_FILE}", ExecutorInfo, strict)


def read_artifact(output_path: str, strict: bool = False) -> ArtifactRecord | None:
    """The `.artifact.json` of an output, or None (as `read_info`)."""
    return read_typed(f"{output_path}/{ARTIFACT_FILE}", ArtifactRecord, strict)
