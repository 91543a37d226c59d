"""A cold chain of 30 trivial steps: each waits on the previous, so this measures the per-step
latency of scheduling, leases and records (the scheduler wakes on completion, never on a timer).

Prints one JSON object: the chain's wall time on threads, and as same-run baseline the time to call
the same 30 functions in a loop. `--with-local` adds the chain on fray's LocalCluster (the product
default: steps in warm worker processes), held to the same target.
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


def link(path: str) -> dict:
    """A trivial step that writes one small file."""
    with open(f"{path}/value.txt", "w") as f:
        f.write("1")
    return {"ok": True}


def run_chain(prefix: str, n: int, cluster) -> float:
    """Seconds for a cold run of an n-step chain under `prefix` on `cluster`."""
    steps: list[StepSpec] = []
    for i in range(n):
        steps.append(StepSpec(name=f"link{i}", fn=link, deps=steps[-1:], hash_attrs={"i": i}))
    t = time.perf_counter()
    try:
        result = StepRunner(prefix=prefix, cluster=cluster, progress=False).run([steps[-1]])
    finally:
        cluster.shutdown()
    seconds = time.perf_counter() - t
    assert set(result.outcomes.values()) == {"succeeded"} and len(result.outcomes) == n
    return seconds


def main() -> None:
    n = 30
    root = tempfile.mkdtemp(prefix="marin-chain-")
    try:
        chain = run_chain(f"{root}/thread", n, ThreadCluster(max_workers=4))
        # The product default: the first step starts a worker process, the others reuse it.
        local = run_chain(f"{root}/local", n, LocalCluster()) if "--with-local" in sys.argv else None
        loop = plain_loop_seconds(link, f"{root}/loop", n)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({
        "benchmark": "execution_chain", "steps": n, "cluster": "thread", "cold_chain_s": round(chain, 4),
        "per_step_ms": round(chain / n * 1e3, 3), "plain_loop_s": round(loop, 6),
        "ratio_vs_plain_loop": round(chain / loop, 1), "target_s": 1.5, "meets_target": chain < 1.5,
        "local_cluster_chain_s": None if local is None else round(local, 3),
        "local_cluster_meets_target": None if local is None else local < 1.5,
    }))


if __name__ == "__main__":
    main()
