"""What a run records about where and from what it ran: each step's `.executor_info` (`step_info`).

`step_info` assembles the record: the step's key record and provenance, with what is the same for
every step of a run (the experiment file, the command line, git state per module) computed once.
The Python environment (every installed distribution's version, host, user), the git state of a
step function's repository and of the experiment's (with a dirty experiment's capped diff), the
experiment file with its sha256, and the command line. Each is computed once per process.
"""

from __future__ import annotations

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
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from marin.execution.artifact import DepRecord, ExecutorInfo, fn_reference, resources_json
from marin.execution.discover import is_experiment_module
from marin.execution.status import HOST

if TYPE_CHECKING:
    from marin.execution.plan import PlannedStep

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
    if state.get("commit") is None:
        state["note"] = NOT_A_CHECKOUT
    return {**_git_of(directory), "experiment": {"directory": experiment, **state}}


NOT_A_CHECKOUT = "not a git checkout"  # what the record says of an experiment outside any repository


def experiment_commit() -> str | None:
    """The git commit of the experiment this process runs, or None; asked of git quietly (its errors
    never reach the terminal)."""
    return _git_of(experiment_directory())["commit"]


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
        if is_experiment_module(name) and getattr(module, "__file__", None):
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


_PROVENANCE = "provenance"


def step_info(
    step: PlannedStep,
    deps: Sequence[PlannedStep],
    prefix: str,
    memo: dict[Any, Any],
    started: float,
    ended: float,
    **extra: Any,
) -> ExecutorInfo:
    """The info record of `step`, run from `started` to `ended`; `memo` is shared by the run's steps.
    `extra` sets further fields (an adopted folder's `adopted` and `manifest`)."""
    spec = step.spec
    if _PROVENANCE not in memo:  # the same for every step of the run: computed once
        memo[_PROVENANCE] = run_provenance()
    fn = spec.fn.func if isinstance(spec.fn, functools.partial) else spec.fn
    module = getattr(fn, "__module__", None)
    git = memo.get(("git", module))
    if git is None:
        git = memo[("git", module)] = git_state(spec.fn)
    provenance = memo[_PROVENANCE]
    return ExecutorInfo(
        name=spec.name,
        key=step.key,
        key_record=step.record,
        hash_attrs=spec.hash_attrs,
        version=spec.version,
        code_fingerprint=step.record["code"].get("fingerprint"),
        deps=tuple(DepRecord(d.name, d.key, d.output_path) for d in deps),
        fn=fn_reference(spec.fn),
        git=git,
        environment=environment(),
        output_path=step.output_path,
        prefix=prefix,
        start_time=started,
        end_time=ended,
        duration_s=round(ended - started, 6),
        resources=resources_json(spec.resources),
        experiment=provenance["experiment"],
        command_line=provenance["command_line"],
        **extra,
    )
