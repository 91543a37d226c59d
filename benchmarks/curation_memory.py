"""Peak memory of fuzzy dedup on --documents documents (default 1 M): goal under 2 GiB RSS.

Documents are short generated paragraphs (about 60 words) in --files JSONL files, one in 10 a near
copy of an earlier one. dedup_fuzzy runs in a fresh interpreter (processes backend, --workers
workers, zephyr's default memory budget per worker); a sampler sums the RSS of that process and all
its children every 0.2 s. Prints one JSON object with the peak, the documents removed and docs/s.
`--quick`: 20,000 documents in 2 files, to check that it runs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psutil

DEDUP = textwrap.dedent("""
    import json, sys, time
    from marin.curation.dedup import DedupConfig, run_dedup_step
    from zephyr import ZephyrConfig
    pattern, out, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
    t = time.perf_counter()
    summary = run_dedup_step(DedupConfig("fuzzy", (pattern,), zephyr=ZephyrConfig(backend="processes",
                             num_workers=workers, quiet=True)), out)
    print(json.dumps({"seconds": time.perf_counter() - t, "summary": summary}))
""")
WORDS = [f"w{i}" for i in range(50_000)]


def write_corpus(folder: Path, documents: int, files: int) -> int:
    rng = random.Random(0)
    per_file = -(-documents // files)
    recent: list[list[str]] = []
    copies = 0
    for f in range(files):
        with (folder / f"docs-{f:04d}.jsonl").open("w") as out:
            for i in range(f * per_file, min(documents, (f + 1) * per_file)):
                if recent and rng.random() < 0.1:
                    words = list(rng.choice(recent))
                    words[rng.randrange(len(words))] = "changed"
                    copies += 1
                else:
                    words = rng.choices(WORDS, k=60)
                    recent = (recent + [words])[-1000:]
                out.write(json.dumps({"id": i, "text": " ".join(words)}) + "\n")
    return copies


def tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--documents", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="20,000 documents: check, do not quote")
    args = parser.parse_args()
    if args.quick:
        args.documents, args.files = 20_000, 2
    with tempfile.TemporaryDirectory(prefix="marin-curation-memory-") as work:
        data = Path(work, "data")
        data.mkdir()
        copies = write_corpus(data, args.documents, args.files)
        proc = subprocess.Popen(
            [sys.executable, "-c", DEDUP, str(data / "*.jsonl"), str(Path(work, "out")), str(args.workers)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        ps, peak = psutil.Process(proc.pid), 0
        while proc.poll() is None:
            peak = max(peak, tree_rss(ps))
            time.sleep(0.2)
        out, err = proc.communicate()
        if proc.returncode:
            raise SystemExit(err[-4000:])
        run = json.loads(out.strip().splitlines()[-1])
    result = {
        "benchmark": "curation_memory",
        "documents": args.documents,
        "planted_near_copies": copies,
        "removed": run["summary"]["documents_in"] - run["summary"]["documents_out"],
        "peak_rss_gib": round(peak / 2**30, 3),
        "goal": "peak RSS < 2 GiB",
        "meets_goal": peak < 2 * 2**30,
        "docs_per_s": round(args.documents / run["seconds"], 1),
        "workers": args.workers,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(result))  # one line: run_all.py reads the last line that starts with {


if __name__ == "__main__":
    main()
