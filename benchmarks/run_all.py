"""Run every benchmark in benchmarks/, one after another, and write their JSON figures to one file.

Each benchmark runs as its own process and prints one JSON object (its figure, a same-run baseline
and the ratio, the load average, whether its goal is met); this collects them with the machine they
ran on. A benchmark that fails is recorded with its error and the others still run; one that is not
there (or, like the GPU benchmark on a machine without one, cannot run) is recorded as skipped.
`--quick` runs smaller sizes, to check that everything works rather than to quote figures.

    .venv/bin/python benchmarks/run_all.py [--quick] [--out benchmarks/results/latest.json] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# name -> (full-size arguments, --quick arguments)
BENCHMARKS: dict[str, tuple[list[str], list[str]]] = {
    "execution_import": ([], []),
    "execution_chain": ([], ["--repeats", "1"]),
    "execution_per_step": ([], ["--steps", "300", "--repeats", "1"]),
    "execution_layered_dag": ([], ["--layers", "10", "--width", "20", "--repeats", "1"]),
    "execution_inputs": ([], []),
    "execution_interrupt": ([], ["--repeats", "1"]),
    "execution_stop_grace": ([], ["--rounds", "2", "--stops", "1"]),
    "storage_round_trips": ([], ["--cached-steps", "500", "--cold-steps", "50", "--listing-steps", "50"]),
    "fray_dispatch": (["--ray"], ["--units", "50", "--repeats", "1"]),
    "procpool_start": ([], ["--starts", "2", "--requests", "200"]),
    "zephyr_throughput": ([], ["--records", "200000", "--small", "50000", "--repeats", "1"]),
    "tokenize_speed": ([], ["--documents", "4000", "--rounds", "1"]),
    "tokenize_scaling": ([], ["--documents", "8000", "--rounds", "1"]),
    "tokenize_memory": ([], ["--sizes", "20", "--file-mb", "10"]),
    "train_cpu_throughput": ([], ["--steps", "4", "--warmup", "1", "--seq-len", "128", "--batch-size", "2"]),
    "train_loader_bucket": (
        [],
        ["--shards", "2", "--shard-tokens", "500000", "--batches", "6", "--baseline-batches", "2"],
    ),
    "train_muon_cpu": ([], ["--steps", "4", "--warmup", "1", "--seq-len", "128", "--batch-size", "2"]),
    "train_document_masking": (
        [],
        ["--steps", "3", "--warmup", "1", "--seq-len", "512", "--batch-size", "1"],
    ),
    "train_multinode": (
        [],
        ["--steps", "6", "--warmup", "2", "--seq-len", "64", "--batch-size", "2", "--rounds", "1"],
    ),
    "train_gpu_mfu": (["--parallelism", "fsdp"], ["--smoke"]),
    "activation_checkpointing_memory": ([], ["--small"]),
    "train_checkpoint_by_time": ([], ["--steps", "10", "--repeats", "1"]),
    "moe_throughput": (
        [],
        [
            "--tokens",
            "1024",
            "--rounds",
            "4",
            "--train-rounds",
            "1",
            "--steps",
            "4",
            "--seq-len",
            "64",
            "--batch-size",
            "2",
        ],
    ),
    "posttrain_sft_throughput": (
        [],
        ["--steps", "5", "--warmup", "1", "--seq-len", "256", "--batch-size", "2", "--repeats", "1"],
    ),
    "posttrain_lora_memory": ([], []),
    "eval_perplexity": ([], []),
    "eval_score_cache": ([], ["--documents", "40", "--items", "10", "--rounds", "1"]),
    "eval_own_generation": ([], ["--prompts", "8", "--new-tokens", "8", "--rounds", "1"]),
    "eval_contamination": ([], ["--items", "400", "--tokens", "2000000"]),
    "scaling_fit": ([], ["--points", "200", "--resamples", "200"]),
    "compare_replicates": ([], ["--items", "200", "--rounds", "1", "--no-all-pairs"]),
    "ui_outputs": ([], ["500"]),
    "curation_minhash_quality": ([], ["--quick"]),
    "curation_memory": ([], ["--quick"]),
    "curation_scaling": ([], ["--quick"]),
    "curation_quality_scoring": ([], ["--quick"]),
    # needs datatrove in its own environment (DATATROVE_PYTHON, see the script); says so when missing
    "curation_vs_datatrove": ([], ["--quick"]),
}


def machine() -> dict:
    """What the figures were measured on."""
    model = ""
    try:
        model = next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            "",
        )
    except OSError:
        pass
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=HERE
        ).stdout.strip()
    except OSError:
        commit = ""
    return {
        "hostname": platform.node(),
        "cpu_model": model or platform.processor(),
        "cpu_count": os.cpu_count(),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "gpu": shutil.which("nvidia-smi") is not None,
        "python": platform.python_version(),
        "git_commit": commit,
    }


def run_one(name: str, args: list[str], timeout: float) -> dict:
    script = HERE / f"{name}.py"
    if not script.exists():
        return {"skipped": f"{script.name} is not in this checkout"}
    if name == "train_gpu_mfu" and "--smoke" not in args and shutil.which("nvidia-smi") is None:
        return {"skipped": "not measured: no device (no nvidia-smi on this machine)"}
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, str(script), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=HERE.parent,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s", "args": args}
    seconds = round(time.perf_counter() - start, 1)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {
            "error": f"exit code {proc.returncode}",
            "stderr_tail": proc.stderr[-2000:],
            "args": args,
            "wall_s": seconds,
        }
    return {"args": args, "wall_s": seconds, "result": json.loads(lines[-1])}


def goals_met(result: dict) -> bool | dict | None:
    """The benchmark's own verdict(s) on its goal(s), when it states one."""
    for key in ("meets_goals", "meets_goal", "meets_target"):
        if key in result:
            return result[key]
    # Benchmarks with several goals name each verdict `<what>_goal_met` (or plain `goal_met`).
    verdicts = {k: v for k, v in result.items() if k == "goal_met" or k.endswith("_goal_met")}
    return verdicts or None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes: check, do not quote")
    parser.add_argument("--out", default=str(HERE / "results" / "latest.json"))
    parser.add_argument(
        "--only", nargs="*", default=None, help="run only these benchmarks (names without .py)"
    )
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per benchmark")
    args = parser.parse_args()
    names = args.only or list(BENCHMARKS)
    unknown = sorted(set(names) - set(BENCHMARKS))
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; known: {', '.join(BENCHMARKS)}")
    report: dict = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "quick": args.quick,
        "machine": machine(),
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
        "benchmarks": {},
    }
    for name in names:
        full, quick = BENCHMARKS[name]
        print(f"run_all: {name} ...", file=sys.stderr, flush=True)
        outcome = run_one(name, quick if args.quick else full, args.timeout)
        if "result" in outcome:
            outcome["goal_met"] = goals_met(outcome["result"])
        report["benchmarks"][name] = outcome
        print(f"run_all: {name}: {json.dumps(outcome)[:300]}", file=sys.stderr, flush=True)
    report["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(out)


if __name__ == "__main__":
    main()
