"""Per-step cost: a cold run of 2,000 trivial independent steps, against a plain loop calling the
same functions (which write the same one small file into pre-made directories).

Prints one JSON object: time per step for both and their ratio. The difference is the engine's
per-step work: directory, lease, status, `.executor_info`, `.artifact.json`, thread hand-offs.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time

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
        runner = StepRunner(prefix=f"{root}/engine", max_concurrent=4, progress=False)
        t = time.perf_counter()
        result = runner.run(steps)
        engine = time.perf_counter() - t
        assert set(result.outcomes.values()) == {"succeeded"} and len(result.outcomes) == n
        paths = [f"{root}/loop/t{i}" for i in range(n)]
        for p in paths:
            os.makedirs(p)
        t = time.perf_counter()
        for p in paths:
            trivial(p)
        loop = time.perf_counter() - t
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({
        "benchmark": "execution_per_step", "steps": n, "engine_s": round(engine, 3),
        "engine_us_per_step": round(engine / n * 1e6, 1), "plain_loop_us_per_step": round(loop / n * 1e6, 1),
        "ratio_vs_plain_loop": round(engine / loop, 1), "max_concurrent": 4,
    }))


if __name__ == "__main__":
    main()
