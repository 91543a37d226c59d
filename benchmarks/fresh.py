"""What the execution benchmarks share: a figure measured in a fresh interpreter, the way a user's
`python experiment.py` meets it, and step functions made by a factory, the way sweeps write them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages, rounded."""
    return [round(x, 2) for x in os.getloadavg()]


def user_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment as a user's interpreter meets it, plus `extra`: with Python's
    bytecode cache on. An installed package's modules are compiled once (pip compiles them at install,
    an editable install on first import); a sandbox that sets PYTHONDONTWRITEBYTECODE makes every
    fresh interpreter compile them again, ~0.05 s of a 10,000-step cached run that no user pays."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, **(extra or {})}


def fresh_json(script: str, *args: str, env: dict[str, str] | None = None, timeout: float = 600) -> dict:
    """Run `python script args...` in a new interpreter (see `user_environment`) and parse the JSON
    object its last stdout line prints; a failure raises with the child's stderr."""
    proc = subprocess.run(
        [sys.executable, script, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=user_environment(env),
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{script} {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def best_of(repeats: int, kinds: list[str], measure: Callable[[str], float]) -> dict[str, float]:
    """Each kind's best figure over `repeats` rounds, the kinds interleaved within a round so that
    load from other processes falls on all of them alike."""
    best = dict.fromkeys(kinds, float("inf"))
    for _ in range(repeats):
        for kind in kinds:
            best[kind] = min(best[kind], measure(kind))
    return best


def best_of_fresh(script: str, kinds: list[str], repeats: int, *args: str) -> dict[str, float]:
    """Each kind's best `seconds` over `repeats` fresh runs of `script [args] --child KIND PREFIX`, every
    run under a new prefix of its own (removed afterwards)."""
    import shutil
    import tempfile

    root = tempfile.mkdtemp(prefix="marin-bench-")
    runs = iter(range(1_000_000))

    def measure(kind: str) -> float:
        prefix = f"{root}/{kind}-{next(runs)}"
        seconds = fresh_json(script, *args, "--child", kind, prefix)["seconds"]
        shutil.rmtree(prefix, ignore_errors=True)
        return seconds

    try:
        return best_of(repeats, kinds, measure)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_steps_seconds(kind: str, prefix: str, targets: list) -> float:
    """Seconds of one cold `StepRunner.run(targets)`: kind 'local' is what a user gets (the default
    cluster, LocalCluster), 'thread' a ThreadCluster (the engine's own cost, no process hop)."""
    import time

    from fray.cluster import ThreadCluster
    from marin.execution.step_runner import StepRunner

    runner = (
        StepRunner(prefix=prefix)
        if kind == "local"
        else StepRunner(prefix=prefix, cluster=ThreadCluster(max_workers=4))
    )
    start = time.perf_counter()
    result = runner.run(targets)
    seconds = time.perf_counter() - start
    assert set(result.outcomes.values()) == {"succeeded"}, result.outcomes
    return seconds


def make_step_fn(name: str) -> Callable[[str], dict]:
    """A step function made by a factory: it writes its name to `out.txt` under its output path."""

    def fn(output_path: str) -> dict:
        with open(f"{output_path}/out.txt", "w") as f:
            f.write(name)
        return {"name": name}

    return fn


def plain_loop_seconds(fns: list[Callable[[str], object]], root: str) -> float:
    """Seconds to call each `fn(path)` on a fresh directory under `root` (made before timing)."""
    import time

    paths = [f"{root}/{i}" for i in range(len(fns))]
    for p in paths:
        os.makedirs(p)
    t = time.perf_counter()
    for fn, p in zip(fns, paths, strict=False):
        fn(p)
    return time.perf_counter() - t
