"""Scaling of the full curation chain on the processes backend: 2 workers against 1, same run.

Chain: extract_text -> filter_language -> filter_quality (Gopher, repetition, C4, FineWeb) ->
dedup_fuzzy on --pages web-synth pages (1,000 pages per shard), each configuration in a fresh
interpreter through the StepRunner, as users run it. Goal: 2 workers >= 1.7x one. `--quick`: 2,000
pages (two shards), to check that it runs. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap

CHAIN = textwrap.dedent("""
    import json, sys, time
    from marin.execution.lazy import lower
    from marin.execution.step_runner import StepRunner
    from marin.experiment.curation import dedup_fuzzy, extract_text, filter_language, filter_quality
    from zephyr import ZephyrConfig
    pages, workers, prefix = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    z = ZephyrConfig(backend="processes", num_workers=workers, quiet=True)
    text = extract_text("bench/text", f"marin://web-synth?pages={pages}", zephyr=z)
    english = filter_language("bench/english", text, zephyr=z)
    good = filter_quality("bench/quality", english, zephyr=z)
    deduped = dedup_fuzzy("bench/dedup", good, zephyr=z)
    t = time.perf_counter()
    StepRunner(prefix=prefix, progress=False).run([lower(deduped)])
    print(json.dumps({"seconds": time.perf_counter() - t}))
""")


def run(pages: int, workers: int) -> float:
    with tempfile.TemporaryDirectory(prefix="marin-curation-scaling-") as prefix:
        done = subprocess.run(
            [sys.executable, "-c", CHAIN, str(pages), str(workers), prefix],
            capture_output=True,
            text=True,
            env=os.environ | {"OMP_NUM_THREADS": "1"},
            check=False,
        )
        if done.returncode:
            raise SystemExit(done.stderr[-4000:])
        return json.loads(done.stdout.strip().splitlines()[-1])["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=16_000)
    parser.add_argument("--quick", action="store_true", help="2,000 pages: check, do not quote")
    args = parser.parse_args()
    if args.quick:
        args.pages = 2_000
    one = run(args.pages, 1)
    two = run(args.pages, 2)
    result = {
        "benchmark": "curation_scaling",
        "pages": args.pages,
        "one_worker_pages_per_s": round(args.pages / one, 1),
        "two_workers_pages_per_s": round(args.pages / two, 1),
        "speedup": round(one / two, 2),
        "goal": "2 workers >= 1.7x one",
        "meets_goal": one / two >= 1.7,
        "cpu_count": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(result))  # one line: run_all.py reads the last line that starts with {


if __name__ == "__main__":
    main()
