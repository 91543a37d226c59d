"""Provenance records written into each step's output directory.

- `.executor_info`: how the output was made: the step's name, key and key record (hash_attrs,
  version or code fingerprint, dependencies with their keys), the dependencies' paths, `fn` as
  module:qualname, git commit and dirty flag of `fn`'s repository and of the experiment's (with the
  experiment repository's path and its capped `git diff HEAD` when dirty), the experiment file and
  its sha256, the command line, Python and every installed distribution's version, host, user,
  start and end times, and resources.
- `.artifact.json`: what the step produced: its returned value and a manifest of its files, each
  with its size and xxh3-128 digest (`marin verify` re-checks it; see `marin.execution.manifest`).

Both are plain writes: they are trusted only once `.executor_status` says SUCCESS, which is
written after them, atomically.
"""

from __future__ import annotations

import dataclasses
import functools
import getpass
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

import orjson

import storage
from marin.execution.errors import StepDefinitionError
from marin.execution.manifest import build_manifest
from marin.execution.records import read_record_json
from marin.execution.status import HOST, LEASE_PREFIX, STATUS_FILE
from marin.execution.step_spec import check_json_value

INFO_FILE = ".executor_info"
ARTIFACT_FILE = ".artifact.json"
LOG_FILE = ".executor_log"
RECORD_FILES = frozenset({INFO_FILE, ARTIFACT_FILE, STATUS_FILE, LOG_FILE})
_PACKAGES = (
    "marin",
    "fsspec",
    "orjson",
    "cloudpickle",
    "numpy",
    "torch",
    "transformers",
    "tokenizers",
    "ray",
)


def is_record_file(name: str) -> bool:
    """Whether a top-level file name in an output directory is one of the engine's records."""
    return name in RECORD_FILES or name.startswith(LEASE_PREFIX) or name.startswith(f"{STATUS_FILE}.tmp-")


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


_environment_lock = threading.Lock()


def environment() -> dict[str, Any]:
    """Python, every installed distribution's version, host and user: the same for every step of
    this process, so it is computed once (under a lock: the runner's drivers ask for it at once).
    `packages` repeats the few that matter most, for `marin info`."""
    with _environment_lock:
        return _environment()


@functools.cache
def _environment() -> dict[str, Any]:
    distributions = installed_distributions()
    packages = {name: distributions[name] for name in _PACKAGES if name in distributions}
    try:
        user = getpass.getuser()
    except Exception:
        user = None
    return {
        "python": platform.python_version(),
        "executable": sys.executable,
        "packages": packages,
        "distributions": distributions,
        "host": HOST,
        "user": user,
    }


def installed_distributions() -> dict[str, str]:
    """{normalized name: version} of every distribution importlib.metadata finds, sorted by name."""
    from importlib import metadata

    found: dict[str, str] = {}
    for dist in metadata.distributions():
        # A wheel's `{name}-{version}.dist-info` folder names both: parsing every METADATA file (the
        # fallback) costs half a second in a large environment.
        folder = getattr(getattr(dist, "_path", None), "name", "")
        stem = _DIST_INFO.match(folder)
        if stem:
            name, version = stem.group(1), stem.group(2)
        else:
            name = dist.metadata["Name"] if dist.metadata else None
            version = dist.version
        if name:
            found.setdefault(re.sub(r"[-_.]+", "-", name).lower(), version)
    return dict(sorted(found.items()))


_DIST_INFO = re.compile(r"^(.+?)-([^-]+)\.dist-info$")


def run_provenance() -> dict[str, Any]:
    """The experiment file (path and sha256, None when there is none) and this process's command line."""
    path = experiment_file()
    experiment = None if path is None else {"file": path, "sha256": _file_sha256(path)}
    return {"experiment": experiment, "command_line": {"argv": list(sys.argv), "cwd": _cwd()}}


def _cwd() -> str | None:
    """The working directory, or None when it was deleted (a Ray job's unpacked working dir can be)."""
    try:
        return os.getcwd()
    except FileNotFoundError:
        return None


@functools.cache
def _file_sha256(path: str) -> str | None:
    """Hashed once per process: the file as this process first read it, close to what it imported."""
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


_git_cache: dict[str, dict[str, Any]] = {}
_git_lock = threading.Lock()


# How `marin.execution.discover` names the module of an experiment file that `marin run` imports.
_EXPERIMENT_MODULE_PREFIX = "marin_experiment_"


def git_state(fn: Callable[..., Any]) -> dict[str, Any]:
    """The git commit and dirty flag of the repository holding `fn`'s source (or the cwd), and
    under `"experiment"` those of the experiment this process runs (see `experiment_directory`).

    A library step's `fn` (tokenize, train) lives in marin's repository, so the experiment's own
    state is recorded beside it: together they say which code and which experiment made the output.
    """
    target = fn.func if isinstance(fn, functools.partial) else fn
    module = sys.modules.get(getattr(target, "__module__", "") or "")
    source = getattr(module, "__file__", None)
    directory = os.path.dirname(os.path.abspath(source)) if source else (_cwd() or ".")
    experiment = experiment_directory()
    state = _git_of(experiment)
    if state.get("dirty") and "diff" not in state:  # a submitted job's state carries its own diff
        state.update(_git_diff_of(experiment))
    return {**_git_of(directory), "experiment": {"directory": experiment, **state}}


_experiment_module_file: str | None = None


def experiment_file() -> str | None:
    """The file of the experiment this process runs: the file `marin run` imported, else the
    `__main__` script, else None. A `__main__` that is installed code (under `python -m pytest`, a
    console script such as `pytest`) is no experiment.

    Only the imported file is cached: a fallback is looked up again, since `marin run` may import
    the experiment later in the process."""
    global _experiment_module_file
    if _experiment_module_file is not None:
        return _experiment_module_file
    for name, module in list(sys.modules.items()):
        if name.startswith(_EXPERIMENT_MODULE_PREFIX) and getattr(module, "__file__", None):
            _experiment_module_file = os.path.abspath(module.__file__)
            return _experiment_module_file
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if main_file and not _is_installed_code(os.path.abspath(main_file)):
        return os.path.abspath(main_file)
    return None


def experiment_directory() -> str:
    """The directory of `experiment_file()`, else the current directory."""
    path = experiment_file()
    return os.path.dirname(path) if path else (_cwd() or ".")


def _is_installed_code(path: str) -> bool:
    """Whether `path` lies in the standard library, site-packages or the environment's scripts."""
    return any(path.startswith(root + os.sep) for root in _installed_roots())


@functools.cache
def _installed_roots() -> tuple[str, ...]:
    import site
    import sysconfig

    roots = {sysconfig.get_path(key) for key in ("stdlib", "platstdlib", "purelib", "platlib", "scripts")}
    roots.update(site.getsitepackages() if hasattr(site, "getsitepackages") else ())
    roots.add(site.getusersitepackages() if hasattr(site, "getusersitepackages") else "")
    return tuple(sorted(os.path.abspath(r) for r in roots if r))


def _git_of(directory: str) -> dict[str, Any]:
    with _git_lock:
        if directory not in _git_cache:
            _git_cache[directory] = _read_git(directory)
        state = dict(_git_cache[directory])
    if state["commit"] is None:
        state = _submitted_git(directory) or state
    return state


# `marin submit` ships the working directory without .git and puts its git state (commit, dirty,
# diff) here as JSON; it stands for the state of any shipped directory (not installed code) that is
# in no repository on the cluster.
SUBMITTED_GIT_ENV = "MARIN_SUBMIT_GIT"


def _submitted_git(directory: str) -> dict[str, Any] | None:
    raw = os.environ.get(SUBMITTED_GIT_ENV)
    if not raw or _is_installed_code(os.path.join(os.path.abspath(directory), "")):
        return None
    try:
        state = json.loads(raw)
    except ValueError:
        return None
    return state if isinstance(state, dict) and "commit" in state else None


# A dirty experiment's `git diff HEAD` is recorded up to this many bytes (its full size beside it).
GIT_DIFF_CAP = 256 << 10
_diff_cache: dict[str, dict[str, Any]] = {}


def _git(directory: str, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", directory, *args], capture_output=True, text=True, timeout=30, errors="replace"
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _git_diff_of(directory: str) -> dict[str, Any]:
    """The repository's path and its `git diff HEAD` (tracked files), capped at GIT_DIFF_CAP bytes."""
    with _git_lock:
        if directory not in _diff_cache:
            root = _git(directory, "rev-parse", "--show-toplevel")
            diff = _git(directory, "diff", "HEAD", "--no-color", "--no-ext-diff") or ""
            data = diff.encode()
            _diff_cache[directory] = {
                "repository": root.strip() if root else None,
                "diff": data[:GIT_DIFF_CAP].decode(errors="ignore"),
                "diff_bytes": len(data),
                "diff_truncated": len(data) > GIT_DIFF_CAP,
            }
        return dict(_diff_cache[directory])


def _read_git(directory: str) -> dict[str, Any]:
    def git(*args: str) -> str | None:
        out = _git(directory, *args)
        return out.strip() if out is not None else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(dirty) if dirty is not None else None}


def resources_json(resources: Any) -> Any:
    """A JSON form of a step's ResourceConfig (None when it asked for nothing)."""
    if resources is None:
        return None
    if hasattr(resources, "to_json"):
        return resources.to_json()
    if dataclasses.is_dataclass(resources):
        return dataclasses.asdict(resources)
    return repr(resources)


def is_output_file(rel: str) -> bool:
    """Whether a path relative to an output directory is an output file (not one of the engine's records)."""
    return "/" in rel or not is_record_file(rel)


def manifest(output_path: str) -> list[dict[str, Any]]:
    """Every output file (not the engine's records) with its size and xxh3-128 digest, sorted by path."""
    return build_manifest(output_path, is_output_file)


def write_records(
    output_path: str, info: dict[str, Any], result: Any, provenance: dict[str, Any] | None = None
) -> None:
    """Write `.executor_info` (with `run_provenance()` added, or `provenance` when the caller has it)
    and `.artifact.json` (with the manifest); the status, written after, makes them valid. Off local
    disk the two writes go out at once (two round trips overlapped)."""
    files = manifest(output_path)
    artifact = {"result": result, "files": files, "total_bytes": sum(f["size"] for f in files)}
    info = {**info, **(provenance if provenance is not None else run_provenance())}
    writes = [
        (f"{output_path}/{INFO_FILE}", orjson.dumps(info, option=orjson.OPT_INDENT_2)),
        (f"{output_path}/{ARTIFACT_FILE}", orjson.dumps(artifact, option=orjson.OPT_INDENT_2)),
    ]
    storage.write_many(writes)


def read_info(output_path: str) -> dict[str, Any] | None:
    """The `.executor_info` of an output."""
    return read_record_json(f"{output_path}/{INFO_FILE}")  # a regular file of at most 16 MiB, else None


def read_artifact(output_path: str) -> dict[str, Any] | None:
    """The `.artifact.json` of an output."""
    return read_record_json(f"{output_path}/{ARTIFACT_FILE}")  # a regular file of at most 16 MiB, else None
