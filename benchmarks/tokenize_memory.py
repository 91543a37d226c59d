"""Tokenization memory: peak RSS of the tokenize step on corpora of growing size (goal: flat).

For each size (default 100 MB and 1 GB of text) JSONL files of --file-mb each are generated in a temp
dir from embedded-corpus stories (each prefixed with its number, so no two documents are equal), then
a fresh Python process runs the tokenize step on them with zephyr's processes backend, and reports
its own peak RSS and the largest RSS any of its worker processes reached (sampled every 20 ms). The
baseline, measured in the
same run, is a process that only imports marin and loads the tokenizer: the floor any tokenize run
pays. Prints one JSON object with every size's peaks and the ratio of the largest size's peak to
the smallest's (flat means ~1.0). Use --sizes 100,300 for a quicker run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

_CHILD = r"""
import json, os, resource, sys, threading, time
import psutil
os.environ["TOKENIZERS_PARALLELISM"] = "false"
worker_peak = 0

def watch_workers():
    # worker processes outlive getrusage(RUSAGE_CHILDREN)'s view, so sample their RSS directly
    global worker_peak
    me = psutil.Process()
    while True:
        for child in me.children(recursive=True):
            try:
                worker_peak = max(worker_peak, child.memory_info().rss)
            except psutil.Error:
                pass
        time.sleep(0.02)

threading.Thread(target=watch_workers, daemon=True).start()
mode, folder, tokenizer, out, workers = sys.argv[1:]
from marin.data.sources import SourceConfig
from marin.data.tokenize_step import TokenizeConfig, run_tokenize
from zephyr import ZephyrConfig
from tokenizers import Tokenizer
Tokenizer.from_file(os.path.join(tokenizer, "tokenizer.json"))
summary = None
t0 = time.perf_counter()
if mode == "run":
    config = TokenizeConfig(SourceConfig(paths=(folder + "/*.jsonl",)), tokenizer=tokenizer, validation_fraction=0.01,
                            zephyr=ZephyrConfig(backend="processes", num_workers=int(workers), quiet=True))
    summary = run_tokenize(config, out)
kib = 1024 if sys.platform != "darwin" else 1
print(json.dumps({
    "driver_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * kib / 2**20,
    "worker_peak_rss_mb": max(worker_peak, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * kib) / 2**20,
    "seconds": time.perf_counter() - t0,
    "tokens": sum(summary["tokens"].values()) if summary else 0,
}))
"""


def generate(folder: str, size_mb: int, file_mb: int) -> int:
    """Write ~size_mb MB of JSONL stories into `folder`; the number of text bytes written."""
    import orjson

    from marin.data.corpus import stories

    base = list(stories(0, 20_000))
    os.makedirs(folder, exist_ok=True)
    target, written, i, part = size_mb * 10**6, 0, 0, 0
    while written < target:
        with open(os.path.join(folder, f"part-{part:04d}.jsonl"), "wb") as f:
            file_written = 0
            while file_written < file_mb * 10**6 and written < target:
                text = f"Story {i}. {base[i % len(base)]}"
                line = orjson.dumps({"text": text}) + b"\n"
                f.write(line)
                file_written += len(line)
                written += len(text.encode())
                i += 1
        part += 1
    return written


def measure(mode: str, folder: str, tokenizer: str, out: str, workers: int) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, folder, tokenizer, out, str(workers)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="100,1000", help="corpus sizes in MB, comma-separated")
    parser.add_argument("--file-mb", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    from marin.data.corpus import stories
    from marin.data.tokenizer_training import train_byte_level_bpe

    work = tempfile.mkdtemp(prefix="marin-tokmem-")
    try:
        tokenizer = os.path.join(work, "tokenizer")
        train_byte_level_bpe(stories(0, 5_000), 4096, tokenizer)
        baseline = measure("baseline", work, tokenizer, "", args.workers)
        runs = []
        for size in sizes:
            folder = os.path.join(work, f"text-{size}")
            text_bytes = generate(folder, size, args.file_mb)
            result = measure("run", folder, tokenizer, os.path.join(work, f"cache-{size}"), args.workers)
            runs.append(
                {"size_mb": size, "text_bytes": text_bytes, **{k: round(v, 1) for k, v in result.items()}}
            )
            shutil.rmtree(folder)
            shutil.rmtree(os.path.join(work, f"cache-{size}"))
        peak = lambda r: max(r["driver_peak_rss_mb"], r["worker_peak_rss_mb"])  # noqa: E731
        print(
            json.dumps(
                {
                    "benchmark": "tokenize_memory",
                    "backend": "processes",
                    "workers": args.workers,
                    "file_mb": args.file_mb,
                    "baseline_import_and_tokenizer_rss_mb": round(baseline["driver_peak_rss_mb"], 1),
                    "runs": runs,
                    "peak_ratio_largest_vs_smallest": round(peak(runs[-1]) / peak(runs[0]), 3),
                    "peak_over_baseline_mb": [
                        round(peak(r) - baseline["driver_peak_rss_mb"], 1) for r in runs
                    ],
                    "goal": "flat: peak_ratio_largest_vs_smallest <= 1.1",
                    "meets_goal": peak(runs[-1]) / peak(runs[0]) <= 1.1,
                    "load_average": [round(x, 2) for x in os.getloadavg()],
                }
            )
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
