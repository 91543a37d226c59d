"""Marina's Outputs page over a prefix of 10,000 step outputs: server time per page load.

A real StepRunner (on threads) fills a prefix with N outputs (default 10,000; pass another N as
the argument). Then the Outputs page is requested in-process through Starlette's TestClient: the
first load right after startup (it waits for the index the server starts building at startup,
which reads every record) and the best of five warm loads (the index reuses an output's records
while its directory keeps its mtime), unfiltered, sorted by age and filtered by name. The same-run baseline
is `list_outputs(prefix)`, which `marin status` calls and which reads every record every time.
Goal: a warm load under 1 s.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time

from fresh import load_average
from starlette.testclient import TestClient

from fray.cluster import ThreadCluster
from marin.execution.explain import list_outputs
from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec
from marin.ui.app import UiConfig, create_app


def result(i: int) -> dict:
    """A step result with a headline metric, as evaluations declare one."""
    return {"headline": {"metric": "bpb", "value": 1.0 + i / 1e5}}


def make_prefix(prefix: str, n: int) -> float:
    import functools

    steps = [
        StepSpec(name=f"group{i % 50}/step{i}", fn=functools.partial(result, i), hash_attrs={"i": i})
        for i in range(n)
    ]
    runner = StepRunner(
        prefix=prefix, max_concurrent=16, cluster=ThreadCluster(max_workers=16), progress=False
    )
    t = time.perf_counter()
    runner.run(steps)
    return time.perf_counter() - t


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    root = tempfile.mkdtemp(prefix="marin-bench-ui-")
    try:
        prefix = os.path.join(root, "outputs")
        fill_s = make_prefix(prefix, n)
        with TestClient(create_app(UiConfig(prefix))) as client:

            def load(**params):
                response = client.get("/", params=params)
                assert response.status_code == 200 and f"{n} outputs" in response.text, response.text[:500]

            def load_filtered():
                response = client.get("/", params={"q": "group7/"})
                assert response.status_code == 200 and f"{n // 50} outputs" in response.text

            cold = timed(load)  # waits for the index the server started building at startup
            warm = min(timed(load) for _ in range(5))
            warm_sorted = min(timed(lambda: load(sort="age", desc="1")) for _ in range(3))
            filtered = min(timed(load_filtered) for _ in range(3))
        baseline = min(timed(lambda: list_outputs(prefix)) for _ in range(3))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(
        json.dumps(
            {
                "benchmark": "ui_outputs",
                "outputs": n,
                "fill_prefix_s": round(fill_s, 1),
                "cold_page_s": round(cold, 3),
                "warm_page_s": round(warm, 3),
                "warm_sorted_by_age_s": round(warm_sorted, 3),
                "warm_filtered_s": round(filtered, 3),
                "baseline_list_outputs_s": round(baseline, 3),
                "ratio_warm_vs_baseline": round(warm / baseline, 2),
                "goal_warm_page_s": 1.0,
                "meets_goal": warm < 1.0,
                "load_average": load_average(),
            }
        )
    )


if __name__ == "__main__":
    main()
