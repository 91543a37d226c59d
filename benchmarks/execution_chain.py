"""A cold chain of 30 trivial steps: each waits on the previous, so this measures the per-step
latency of scheduling, leases and records (the scheduler wakes on completion, never on a timer).

Prints one JSON object: the chain's wall time, and as same-run baseline the time to call the same
30 functions in a loop.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time

from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec


def link(path: str) -> dict:
    """A trivial step that writes one small file."""
    with open(f"{path}/value.txt", "w") as f:
        f.write("1")
    return {"ok": True}


def main() -> None:
    n = 30
    root = tempfile.mkdtemp(prefix="marin-chain-")
    try:
        steps: list[StepSpec] = []
        for i in range(n):
            steps.append(StepSpec(name=f"link{i}", fn=link, deps=steps[-1:], hash_attrs={"i": i}))
        t = time.perf_counter()
        result = StepRunner(prefix=f"{root}/chain", progress=False).run([steps[-1]])
        chain = time.perf_counter() - t
        assert set(result.outcomes.values()) == {"succeeded"} and len(result.outcomes) == n
        base_dir = f"{root}/loop"
        paths = [f"{base_dir}/{i}" for i in range(n)]
        for p in paths:
            os.makedirs(p)
        t = time.perf_counter()
        for p in paths:
            link(p)
        loop = time.perf_counter() - t
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({
        "benchmark": "execution_chain", "steps": n, "cold_chain_s": round(chain, 4),
        "per_step_ms": round(chain / n * 1e3, 3), "plain_loop_s": round(loop, 6),
        "ratio_vs_plain_loop": round(chain / loop, 1), "target_s": 1.5, "meets_target": chain < 1.5,
    }))


if __name__ == "__main__":
    main()
