"""Import cost of the engine: `import marin.execution.step_runner` in a fresh interpreter.

Prints one JSON object: the median import time over several fresh processes (goal <= 0.15 s), the
interpreter's own start (`python -c pass`) as the same-run baseline and the ratio to it, the load
average, and whether torch / ray / transformers got loaded (the goal also needs none of them).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

from fresh import load_average, user_environment

GOAL_S = 0.15
PROBE = (
    "import sys, time; t = time.perf_counter(); import marin.execution.step_runner; "
    "d = time.perf_counter() - t; "
    "print(d, sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'ray', 'transformers'}))"
)


def fresh(code: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=user_environment()
    ).stdout


def main() -> None:
    runs = 7
    imports, heavy = [], set()
    for _ in range(runs):
        seconds, modules = fresh(PROBE).split(" ", 1)
        imports.append(float(seconds))
        heavy |= set(eval(modules))  # noqa: S307 - our own probe's printed list
    bare = statistics.median(
        float(
            fresh(
                "import subprocess, sys, time; t = time.perf_counter(); "
                "subprocess.run([sys.executable, '-c', 'pass']); print(time.perf_counter() - t)"
            )
        )
        for _ in range(3)
    )
    median = statistics.median(imports)
    print(
        json.dumps(
            {
                "benchmark": "execution_import",
                "import_step_runner_s": round(median, 4),
                "import_step_runner_min_s": round(min(imports), 4),
                "interpreter_start_s": round(bare, 4),
                "ratio_vs_interpreter_start": round(median / bare, 2),
                "heavy_modules_loaded": sorted(heavy),
                "load_average": load_average(),
                "goal_s": GOAL_S,
                "meets_goal": median <= GOAL_S and not heavy,
            }
        )
    )


if __name__ == "__main__":
    main()
