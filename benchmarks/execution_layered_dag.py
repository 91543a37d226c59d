"""A 10,000-step layered DAG the way users write one (the "Execution" reference workload).

100 layers of 100 steps: `s{d}_{w}` depends on `s{d-1}_{w}` and `s{d-1}_{(w+1)%100}` and has
`hash_attrs={"d": d, "w": w}`. Every `fn` is a closure made by a factory `make(name, sleep)`: it
appends its name to a log file, sleeps `sleep` (0), and writes `out.txt` with its name. The
experiment runs as a fresh `python dag.py` each time, `StepRunner().run(last_layer)` on the default
cluster with MARIN_PREFIX set and Python's bytecode cache on, as for an installed package (see
`fresh.user_environment`).

Figures (best of `--repeats`):
- cold: the wall time of the first run on an empty prefix;
- cached: the wall time of the second run minus the same-run baseline, the wall time of
  `python -c "import marin.execution.step_runner"`;
- changed (no goal): planning the same DAG after every closure's captured `sleep` changed, so
  that all 10,000 steps plan `run: changed` with a field-by-field diff against their recorded
  version (`StepRunner().plan`, nothing runs), minus the same baseline.

- driver peak RSS: the largest resident set of the `python dag.py` process itself (not its
  workers) over the cold and cached runs;
- files per step: the files and folders a cold run leaves under the prefix, per step (each step
  also creates and removes its lease file and two temporary status files on the way);
- with `--after-delete`: one more cold run on a fresh prefix right after deleting a finished one
  (on ext4 the inode allocator then steps over the inodes just freed).

Prints one JSON object with the figures, the baseline, their ratios to it, the load average and
whether the goals are met: for 10,000 steps (100 x 100) cached <= 0.3 s and cold <= 10 s; for
100,000 steps (1,000 x 100) cached <= 1.5 s, driver peak RSS <= 1 GiB and cold <= 77.7 s (the
landed engine's figure on a quiet 2-core machine). At another size the goals, and whether they are
met, are null.
Usage: `python benchmarks/execution_layered_dag.py [--layers 100] [--width 100] [--repeats 3] [--after-delete]`
(100,000 steps: `--layers 1000 --repeats 1`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from fresh import load_average, user_environment

DAG = """
import os
import sys
import time

from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec

LAYERS, WIDTH, LOG = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
SLEEP, DRY_RUN = (float(sys.argv[4]), True) if len(sys.argv) > 4 else (0, False)


def make(name, sleep):
    def fn(output_path):
        with open(LOG, "a") as log:
            log.write(name + "\\n")
        time.sleep(sleep)
        with open(os.path.join(output_path, "out.txt"), "w") as f:
            f.write(name)

    return fn


previous = []
for d in range(LAYERS):
    layer = []
    for w in range(WIDTH):
        deps = [previous[w], previous[(w + 1) % WIDTH]] if previous else []
        name = f"s{d}_{w}"
        layer.append(StepSpec(name=name, fn=make(name, SLEEP), deps=deps, hash_attrs={"d": d, "w": w}))
    previous = layer

if DRY_RUN:
    StepRunner().plan(previous)  # what `dry_run` prints, without rendering a 10,000-row table
else:
    StepRunner().run(previous)
if os.environ.get("LAYERED_DAG_RSS"):
    import resource

    with open(os.environ["LAYERED_DAG_RSS"], "a") as f:
        f.write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) + "\\n")  # KiB on Linux
"""

# The goals by number of steps: cached (after import) and cold seconds, driver peak RSS in bytes.
GOALS = {
    10_000: {"cached_s": 0.3, "cold_s": 10.0, "rss_bytes": None},
    100_000: {"cached_s": 1.5, "cold_s": 77.7, "rss_bytes": 1 << 30},
}


def _timed(cmd: list[str], env: dict[str, str], cwd: str) -> float:
    # The child's output goes to a file (as cheap as /dev/null), so a failed run can say why.
    with open(os.path.join(cwd, "child-output.txt"), "w+") as out:
        t = time.perf_counter()
        done = subprocess.run(cmd, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        seconds = time.perf_counter() - t
        if done.returncode != 0:
            out.seek(0)
            tail = out.read()[-4000:]
            raise SystemExit(f"{' '.join(cmd)} exited with {done.returncode}; its last output:\n{tail}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, default=100)
    parser.add_argument("--width", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--after-delete", action="store_true", help="also a cold run right after deleting a prefix"
    )
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="marin-layered-")
    try:
        script = os.path.join(root, "dag.py")
        with open(script, "w") as f:
            f.write(DAG)
        env = user_environment()
        rss_file = os.path.join(root, "rss.txt")
        env["LAYERED_DAG_RSS"] = rss_file
        baseline = min(
            _timed([sys.executable, "-c", "import marin.execution.step_runner"], env, root)
            for _ in range(max(3, args.repeats))
        )
        colds, cacheds, changeds = [], [], []
        for i in range(args.repeats):
            prefix = os.path.join(root, f"prefix{i}")
            log = os.path.join(root, f"log{i}.txt")
            env["MARIN_PREFIX"] = prefix
            cmd = [sys.executable, script, str(args.layers), str(args.width), log]
            colds.append(_timed(cmd, env, root))
            with open(log) as f:
                ran = sum(1 for _ in f)
            assert ran == args.layers * args.width, f"cold run ran {ran} steps"
            cacheds.append(_timed(cmd, env, root))
            with open(log) as f:
                assert sum(1 for _ in f) == ran, "the cached run ran steps again"
            changeds.append(_timed([*cmd, "1"], env, root))  # plans only: runs nothing
            if i == 0:
                files = sum(len(d) + len(f) for _, d, f in os.walk(prefix))
            # Each repeat's prefix is deleted only at the end: deleting 10,000 outputs (80,000 files)
            # just before the next cold run would make it pay for them, on ext4 without a journal
            # (whose allocator steps over each inode freed in the last seconds to minutes).
        after_delete = None
        if args.after_delete:
            shutil.rmtree(os.path.join(root, "prefix0"))
            env["MARIN_PREFIX"] = os.path.join(root, "after-delete")
            log = os.path.join(root, "log-after-delete.txt")
            after_delete = _timed([sys.executable, script, str(args.layers), str(args.width), log], env, root)
        with open(rss_file) as f:
            peak_rss = max(int(line) for line in f if line.strip()) * 1024
    finally:
        shutil.rmtree(root, ignore_errors=True)
    cold, cached_raw, changed = min(colds), min(cacheds), min(changeds) - baseline
    cached = cached_raw - baseline
    steps = args.layers * args.width
    goal = GOALS.get(steps, {"cached_s": None, "cold_s": None, "rss_bytes": None})  # none at another size
    print(
        json.dumps(
            {
                "benchmark": "execution_layered_dag",
                "steps": steps,
                "cluster": "default (LocalCluster)",
                "repeats": args.repeats,
                "import_baseline_s": round(baseline, 3),
                "cold_s": round(cold, 3),
                "cached_minus_import_s": round(cached, 3),
                "cached_raw_s": round(cached_raw, 3),
                "changed_plan_minus_import_s": round(changed, 3),
                "cold_ratio_vs_import": round(cold / baseline, 1),
                "cached_raw_ratio_vs_import": round(cached_raw / baseline, 2),
                "driver_peak_rss_mib": round(peak_rss / (1 << 20), 1),
                "files_per_step": round(files / steps, 2),
                "cold_after_delete_s": round(after_delete, 3) if after_delete is not None else None,
                "goal_cached_s": goal["cached_s"],
                "goal_cold_s": goal["cold_s"],
                "goal_driver_peak_rss_mib": goal["rss_bytes"] >> 20 if goal["rss_bytes"] else None,
                "cached_goal_met": cached <= goal["cached_s"] if goal["cached_s"] else None,
                "cold_goal_met": cold <= goal["cold_s"] if goal["cold_s"] else None,
                "rss_goal_met": peak_rss <= goal["rss_bytes"] if goal["rss_bytes"] else None,
                "load_average": load_average(),
            }
        )
    )


if __name__ == "__main__":
    main()
