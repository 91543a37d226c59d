"""Per-step cost: a cold run of 2,000 trivial independent steps, against a plain loop calling the
same functions (which write the same one small file into pre-made directories).

Prints one JSON object: time per step for both and their ratio. The difference is the engine's
per-step work: directory, lease, status, `.executor_info`, `.artifact.json`, thread hand-offs.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time

from execution_baseline import plain_loop_seconds
from fray.cluster import ThreadCluster
from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec


def trivial(path: str) -> None:
    """Write one small file."""
    with open(f"{path}/out.txt", "w") as f:
        f.write("x")


def main() -> None:
    n = 2000
    root = tempfile.mkdtemp(prefix="marin-per-step-")
    try:
        steps = [StepSpec(name=f"t{i}", fn=trivial, hash_attrs={"i": i}) for i in range(n)]
        # Threads, so the figure is the engine's own cost; fray's dispatch benchmark covers processes.
        runner = StepRunner(prefix=f"{root}/engine", max_concurrent=4, cluster=ThreadCluster(max_workers=4),
                            progress=False)
        t = time.perf_counter()
        result = runner.run(steps)
        engine = time.perf_counter() - t
        assert set(result.outcomes.values()) == {"succeeded"} and len(result.outcomes) == n
        loop = plain_loop_seconds(trivial, f"{root}/loop", n)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({
        "benchmark": "execution_per_step", "steps": n, "engine_s": round(engine, 3),
        "engine_us_per_step": round(engine / n * 1e6, 1), "plain_loop_us_per_step": round(loop / n * 1e6, 1),
        "ratio_vs_plain_loop": round(engine / loop, 1), "max_concurrent": 4, "cluster": "thread",
    }))


if __name__ == "__main__":
    main()
