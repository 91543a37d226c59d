"""Run in a child process by test_memory.py: a group_by over input several times the memory budget.

Prints one JSON line: the input size, the RSS before the pipeline ran, and the peak RSS of the
process (VmHWM), plus the pipeline's output summary for checking.
"""

from __future__ import annotations

import json
import resource
import sys
from pathlib import Path

import orjson
import psutil

from zephyr import Dataset


def peak_rss() -> int:
    """This process's peak resident set size in bytes.

    VmHWM belongs to the process's own address space; ru_maxrss would also count the RSS of the
    parent that forked it (Linux carries it across exec).
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # not Linux: kilobytes on most systems


def key_of(record: dict) -> str:
    return record["k"]


def summarize(key: str, records) -> dict:
    n = chars = 0
    for record in records:
        n += 1
        chars += len(record["text"])
    return {"k": key, "n": n, "chars": chars}


def main(work: Path, budget: int, input_bytes: int, files: int) -> None:
    inputs = work / "in"
    inputs.mkdir()
    record_size = 1000
    per_file = input_bytes // files // record_size
    for f in range(files):
        with open(inputs / f"part-{f}.jsonl", "wb") as out:
            for i in range(per_file):
                j = f * per_file + i
                key = "hot" if j % 3 == 0 else f"k{j % 2000}"  # one key holds a third of everything
                out.write(orjson.dumps({"k": key, "i": j, "text": chr(97 + j % 26) * 950}) + b"\n")
    written = sum(p.stat().st_size for p in inputs.iterdir())
    before = psutil.Process().memory_info().rss
    result = (
        Dataset.from_files(str(inputs / "*.jsonl"))
        .group_by(key_of, summarize, num_shards=4)
        .write_jsonl(
            str(work / "out"),
            backend="sync",
            quiet=True,
            memory_budget_bytes=budget,
            spill_dir=str(work / "spill"),
        )
    )
    peak = peak_rss()
    groups = [orjson.loads(line) for p in result.paths for line in Path(p).read_bytes().splitlines()]
    print(
        json.dumps(
            {
                "input_bytes": written,
                "rss_before": before,
                "peak_rss": peak,
                "records": per_file * files,
                "groups": len(groups),
                "grouped_records": sum(g["n"] for g in groups),
                "hot": next(g["n"] for g in groups if g["k"] == "hot"),
            }
        )
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
