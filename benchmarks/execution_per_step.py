"""Per-step cost: a cold run of 2,000 trivial independent steps, against a plain loop calling the
same functions (which write the same one small file into pre-made directories).

Prints one JSON object: time per step for both and their ratio. The difference is the engine's
per-step work: directory, lease, status, `.executor_info`, `.artifact.json`, thread hand-offs.
`--with-local` adds the same run on fray's LocalCluster (the product default: steps in warm worker
processes, as many at once as the machine has cores), which adds pickling and a process hop per step.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time

from execution_baseline import plain_loop_seconds
from fray.cluster import LocalCluster, ThreadCluster
from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec


def trivial(path: str) -> None:
    """Write one small file."""
    with open(f"{path}/out.txt", "w") as f:
        f.write("x")


def run_steps(steps: list[StepSpec], prefix: str, cluster) -> float:
    """Seconds for a cold run of `steps` under `prefix` on `cluster` (shut down afterwards)."""
    runner = StepRunner(prefix=prefix, max_concurrent=4, cluster=cluster, progress=False)
    t = time.perf_counter()
    try:
        result = runner.run(steps)
    finally:
        cluster.shutdown()
    seconds = time.perf_counter() - t
    assert set(result.outcomes.values()) == {"succeeded"} and len(result.outcomes) == len(steps)
    return seconds


def main() -> None:
    n = 2000
    root = tempfile.mkdtemp(prefix="marin-per-step-")
    try:
        steps = [StepSpec(name=f"t{i}", fn=trivial, hash_attrs={"i": i}) for i in range(n)]
        # Threads, so the figure is the engine's own cost; `--with-local` adds the product default.
        engine = run_steps(steps, f"{root}/engine", ThreadCluster(max_workers=4))
        local = run_steps(steps, f"{root}/local", LocalCluster()) if "--with-local" in sys.argv else None
        loop = plain_loop_seconds(trivial, f"{root}/loop", n)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({
        "benchmark": "execution_per_step", "steps": n, "engine_s": round(engine, 3),
        "engine_us_per_step": round(engine / n * 1e6, 1), "plain_loop_us_per_step": round(loop / n * 1e6, 1),
        "ratio_vs_plain_loop": round(engine / loop, 1), "max_concurrent": 4, "cluster": "thread",
        "local_cluster_us_per_step": None if local is None else round(local / n * 1e6, 1),
        "local_cluster_ratio_vs_plain_loop": None if local is None else round(local / loop, 1),
    }))


if __name__ == "__main__":
    main()
