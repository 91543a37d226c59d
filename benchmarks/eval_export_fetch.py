"""Fetching a model export from an object store to the local export cache: calls and time (issue 22).

The store is `benchmarks/storage_round_trips.py`'s `latency://` filesystem: every fsspec call is
counted and waits `--latency-ms` first. A train step's export (`hf/`: config, tokenizer files and
`--shards` weight shards of `--shard-mb` MB) is written there with its `.artifact.json` manifest;
then `marin.evaluation.export_cache.fetch` brings it to an empty local cache, and again (a cache hit).

Goal: one listing plus one read per file, the reads at once. Baseline in the same run: the same files
downloaded one after another (`storage.download` in a loop), as a naive copy would.

Prints one JSON object: the calls of the cold fetch by method, its wall time, the serial baseline's,
their ratio, the calls of a warm fetch, and whether the call goal is met.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fresh import load_average  # noqa: E402
from storage_round_trips import register  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--shard-mb", type=float, default=4.0)
    args = parser.parse_args()

    root = tempfile.mkdtemp(prefix="latency-root-")
    os.environ["LATENCY_ROOT"] = root
    os.environ["LATENCY_S"] = "0"
    os.environ["MARIN_EXPORT_CACHE"] = tempfile.mkdtemp(prefix="export-cache-")
    fs = register()

    import storage
    from marin.evaluation import export_cache
    from marin.execution.manifest import DIGEST, bytes_digest

    files = {"config.json": b'{"model_type": "llama"}', "tokenizer.json": b"{}" * 5000}
    for i in range(args.shards):
        files[f"model-{i:05d}-of-{args.shards:05d}.safetensors"] = os.urandom(int(args.shard_mb * 1e6))
    url = "latency://exp/checkpoints/model-abc/hf"
    for name, data in files.items():
        storage.write_atomic(storage.join(url, name), data)
    manifest = [
        {"path": f"hf/{n}", "size": len(d), DIGEST: bytes_digest(d)} for n, d in sorted(files.items())
    ]

    os.environ["LATENCY_S"] = str(args.latency_ms / 1000)
    fs.reset()
    start = time.perf_counter()
    local = export_cache.fetch(url, manifest)
    cold_s = time.perf_counter() - start
    cold_calls = dict(fs.calls)

    fs.reset()
    start = time.perf_counter()
    assert export_cache.fetch(url, manifest) == local
    warm_s = time.perf_counter() - start
    warm_calls = dict(fs.calls)

    serial_dir = tempfile.mkdtemp(prefix="serial-")
    fs.reset()
    start = time.perf_counter()
    for name, _ in storage.walk_files(url):
        target = os.path.join(serial_dir, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        storage.download(storage.join(url, name), target)
    serial_s = time.perf_counter() - start

    listings = cold_calls.get("find", 0) + cold_calls.get("ls", 0) + cold_calls.get("glob", 0)
    reads = cold_calls.get("get_file", 0) + cold_calls.get("cat_file", 0) + cold_calls.get("open", 0)
    print(
        json.dumps(
            {
                "latency_ms": args.latency_ms,
                "files": len(files),
                "bytes": sum(len(d) for d in files.values()),
                "cold_fetch_calls": cold_calls,
                "cold_fetch_calls_total": sum(cold_calls.values()),
                "cold_fetch_s": round(cold_s, 4),
                "serial_download_s": round(serial_s, 4),
                "cold_vs_serial": round(cold_s / serial_s, 3),
                "warm_fetch_calls": warm_calls,
                "warm_fetch_s": round(warm_s, 4),
                "calls_goal": "one listing plus one read per file",
                "calls_goal_met": listings == 1
                and reads == len(files)
                and sum(cold_calls.values()) == 1 + len(files),
                "load_average": load_average(),
            }
        )
    )


if __name__ == "__main__":
    main()
