"""Storage round trips per step, and what they cost at object-store latency (issue 17).

`latency://` is an fsspec filesystem registered here: a `DirFileSystem` over a local folder
($LATENCY_ROOT) that counts every call made on it (at the fsspec method level: a call made inside
another is not counted again, as one HTTP request to an object store is one call) and sleeps
$LATENCY_S before each one, a stand-in for a bucket 20 ms away. It has no atomic rename, so the
engine treats it as it treats an object store.

Each case runs in a fresh interpreter (`--child`), on the default cluster (LocalCluster), with step
functions made by a factory, `StepRunner(prefix="latency://...")`:
- calls per cached step: a cached run of `--cached-steps` independent steps, calls / steps;
- calls per cold step: a cold run of `--cold-steps` trivial independent steps, calls / steps
  (everything: the plan, the lease, the records, and fray's upload of the step's log), split into
  the engine's calls and the cluster's (fray's log: `put_file`, and `get_file` were it fetched);
- the cached run at `--latency-ms` (goal <= 10 s for 10,000 steps) and the cold run at that latency
  with the default concurrency (goal <= 60 s for 1,000 steps), each beside the same case at zero
  latency measured in the same run (the ratio is latency / zero latency).
- listing: `marin status` (`list_outputs`), a dry `marin gc` (`gc.collect`) and the UI's index
  (`OutputIndex.entries`) over a bucket of `--listing-steps` outputs at `--latency-ms`, each with the
  outputs' records read at once (`storage.overlapped`) and, as the same-run baseline, one after
  another (the ratio is overlapped / serial).
The cached and listing prefixes are populated once (zero latency, a ThreadCluster: not timed).

Usage: `python benchmarks/storage_round_trips.py [--cached-steps 10000] [--cold-steps 1000]
[--listing-steps 200] [--latency-ms 20]`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fresh import fresh_json, load_average  # noqa: E402

CACHED_GOAL_S = 10.0  # 10,000 cached steps at 20 ms
COLD_GOAL_S = 60.0  # 1,000 cold trivial steps at 20 ms
CACHED_CALLS_GOAL = 1.0
COLD_CALLS_GOAL = 10.0

_COUNTED = (
    "ls",
    "info",
    "exists",
    "isdir",
    "isfile",
    "cat_file",
    "cat",
    "pipe_file",
    "pipe",
    "open",
    "rm_file",
    "rm",
    "find",
    "makedirs",
    "mkdir",
    "mv",
    "modified",
    "created",
    "get_file",
    "put_file",
    "du",
    "glob",
    "walk",
    "touch",
    "copy",
    "size",
    "sizes",
    "lexists",
    "cp_file",
)


def register():
    """Register `latency://` (a counting, latency-injecting DirFileSystem over $LATENCY_ROOT); returns its class."""
    import fsspec
    from fsspec.implementations.dirfs import DirFileSystem
    from fsspec.implementations.local import LocalFileSystem

    class LatencyFileSystem(DirFileSystem):
        protocol = "latency"
        calls: Counter = Counter()
        callers: Counter = Counter()  # "engine" (marin's records) or "cluster" (fray's log upload/fetch)
        in_flight = 0
        most_in_flight = 0  # the most calls that were waiting on their latency at one time
        lock = threading.Lock()
        depth = threading.local()

        @classmethod
        def reset(cls) -> None:
            """Forget the calls counted so far."""
            cls.calls.clear()
            cls.callers.clear()
            cls.most_in_flight = 0

        def __init__(self, **kwargs):
            super().__init__(path=os.environ["LATENCY_ROOT"], fs=LocalFileSystem(auto_mkdir=True), **kwargs)

        @classmethod
        def _strip_protocol(cls, path):
            path = path[len("latency://") :] if path.startswith("latency://") else path
            return path.rstrip("/")

    def counted(name):
        inner = getattr(DirFileSystem, name)

        def method(self, *args, **kwargs):
            depth = getattr(LatencyFileSystem.depth, "n", 0)
            if depth == 0:
                # fray moves a step's log with whole-file uploads (and fetches); nothing else does.
                # (LocalCluster dispatches a step from the runner's own driver thread, so the thread
                # no longer tells the two apart.)
                who = "cluster" if name in ("put_file", "get_file") else "engine"
                with LatencyFileSystem.lock:
                    LatencyFileSystem.calls[name] += 1
                    LatencyFileSystem.callers[who] += 1
                    LatencyFileSystem.in_flight += 1
                    LatencyFileSystem.most_in_flight = max(
                        LatencyFileSystem.most_in_flight, LatencyFileSystem.in_flight
                    )
                try:
                    time.sleep(float(os.environ.get("LATENCY_S", "0")))
                finally:
                    with LatencyFileSystem.lock:
                        LatencyFileSystem.in_flight -= 1
            LatencyFileSystem.depth.n = depth + 1
            try:
                return inner(self, *args, **kwargs)
            finally:
                LatencyFileSystem.depth.n = depth

        method.__name__ = name
        return method

    for name in _COUNTED:
        if hasattr(DirFileSystem, name):
            setattr(LatencyFileSystem, name, counted(name))
    fsspec.register_implementation("latency", LatencyFileSystem, clobber=True)
    globals()["LatencyFileSystem"] = LatencyFileSystem
    return LatencyFileSystem


def make_fn(name: str):
    """A trivial step function made by a factory."""

    def fn() -> dict:
        return {"name": name}

    return fn


def listing_child(prefix: str) -> None:
    """Time `marin status`, a dry `marin gc` and the UI index over `prefix`, overlapped then serial."""
    import storage
    from marin.execution import explain, gc
    from marin.ui.index import OutputIndex

    cases = {
        "status": lambda: explain.list_outputs(prefix),
        "gc": lambda: gc.collect(prefix),
        "ui_index": lambda: OutputIndex(prefix).entries(),
    }
    overlapped = storage.overlapped
    out = {}
    for mode in ("overlapped", "serial"):
        if mode == "serial":  # the baseline: each output's records read one after another
            storage.overlapped = lambda fn, items, where=None: [fn(x) for x in items]
        for name, case in cases.items():
            start = time.perf_counter()
            case()
            out[f"{name}_{mode}_s"] = time.perf_counter() - start
    storage.overlapped = overlapped
    print(json.dumps(out))


def child(kind: str, steps: int, prefix: str) -> None:
    """Run one case in this (fresh) interpreter and print its JSON."""
    register()
    if kind == "listing":
        listing_child(prefix)
        return
    from fray.cluster import ThreadCluster
    from marin.execution.step_runner import StepRunner
    from marin.execution.step_spec import StepSpec

    specs = [StepSpec(name=f"s{i}", fn=make_fn(f"s{i}"), hash_attrs={"i": i}) for i in range(steps)]
    if kind == "populate":
        os.environ["LATENCY_S"] = "0"
        runner = StepRunner(prefix=prefix, cluster=ThreadCluster(max_workers=8), progress=False)
    else:
        runner = StepRunner(prefix=prefix, progress=False)  # the default cluster and concurrency
    fs = globals()["LatencyFileSystem"]
    fs.reset()
    start = time.perf_counter()
    result = runner.run(specs)
    seconds = time.perf_counter() - start
    outcomes = Counter(result.outcomes.values())
    want = "cached" if kind == "cached" else "succeeded"
    assert outcomes == {want: steps}, outcomes
    calls = dict(fs.calls)
    print(
        json.dumps(
            {
                "seconds": seconds,
                "calls": sum(calls.values()),
                "by_method": calls,
                "by_caller": dict(fs.callers),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cached-steps", type=int, default=10_000)
    parser.add_argument("--cold-steps", type=int, default=1_000)
    parser.add_argument("--listing-steps", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--child", nargs=3, metavar=("KIND", "STEPS", "PREFIX"))
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.child[2])
        return
    root = tempfile.mkdtemp(prefix="marin-latency-")
    latency = args.latency_ms / 1000
    here = os.path.abspath(__file__)

    def run(kind: str, steps: int, prefix: str, seconds_per_call: float) -> dict:
        env = {"LATENCY_ROOT": root, "LATENCY_S": str(seconds_per_call)}
        return fresh_json(here, "--child", kind, str(steps), prefix, env=env, timeout=3600)

    try:
        run("populate", args.cached_steps, "latency://cached", 0.0)
        cached0 = run("cached", args.cached_steps, "latency://cached", 0.0)
        cached = run("cached", args.cached_steps, "latency://cached", latency)
        cold0 = run("cold", args.cold_steps, "latency://cold0", 0.0)
        cold = run("cold", args.cold_steps, "latency://cold", latency)
        run("populate", args.listing_steps, "latency://listing", 0.0)
        listing = run("listing", args.listing_steps, "latency://listing", latency)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    # The plan lists the prefix once (a page per 1,000 entries on GCS/S3): rounded, it is no call per step.
    per_cached = round(cached["calls"] / args.cached_steps, 2)
    per_cold = round(cold["calls"] / args.cold_steps, 2)  # likewise: 10,001 calls for 1,000 steps is 10.0
    cached_goal = CACHED_GOAL_S * args.cached_steps / 10_000
    cold_goal = COLD_GOAL_S * args.cold_steps / 1_000
    print(
        json.dumps(
            {
                "benchmark": "storage_round_trips",
                "cluster": "default (LocalCluster)",
                "latency_ms": args.latency_ms,
                "cached_steps": args.cached_steps,
                "cold_steps": args.cold_steps,
                "calls_per_cached_step": round(per_cached, 3),
                "calls_per_cold_step": round(per_cold, 3),
                "engine_calls_per_cold_step": round(cold["by_caller"].get("engine", 0) / args.cold_steps, 3),
                "cluster_calls_per_cold_step": round(
                    cold["by_caller"].get("cluster", 0) / args.cold_steps, 3
                ),
                "cached_calls_by_method": cached["by_method"],
                "cold_calls_by_method": cold["by_method"],
                "cached_s": round(cached["seconds"], 3),
                "cached_zero_latency_s": round(cached0["seconds"], 3),
                "cached_ratio_vs_zero_latency": round(cached["seconds"] / cached0["seconds"], 2),
                "cold_s": round(cold["seconds"], 3),
                "cold_zero_latency_s": round(cold0["seconds"], 3),
                "cold_ratio_vs_zero_latency": round(cold["seconds"] / cold0["seconds"], 2),
                "listing_steps": args.listing_steps,
                **{
                    f"{tool}_{what}": round(listing[f"{tool}_{what}_s"], 3)
                    for tool in ("status", "gc", "ui_index")
                    for what in ("overlapped", "serial")
                },
                **{
                    f"{tool}_ratio_overlapped_vs_serial": round(
                        listing[f"{tool}_overlapped_s"] / listing[f"{tool}_serial_s"], 3
                    )
                    for tool in ("status", "gc", "ui_index")
                },
                "goal_cached_s": cached_goal,
                "goal_cold_s": cold_goal,
                "load_average": load_average(),
                "cached_goal_met": cached["seconds"] <= cached_goal,
                "cold_goal_met": cold["seconds"] <= cold_goal,
                "calls_per_cached_step_goal_met": per_cached <= CACHED_CALLS_GOAL,
                "calls_per_cold_step_goal_met": per_cold <= COLD_CALLS_GOAL,
            }
        )
    )


if __name__ == "__main__":
    main()
