"""Multi-node overhead: a 2-replica DDP gang on 2 Ray nodes against plain `torchrun` with 2 processes.

    .venv/bin/python benchmarks/train_multinode.py [--steps 30] [--seq-len 256] [--batch-size 8] [--rounds 2]

Both run marin's `train()` on the same model (`experiments.llama.llama_30m` at the cache's
vocabulary), batch, data and seed, one CPU thread per process, gloo. Ours: a RayCluster (a head and a
worker node started with `ray start`, 1 CPU each, as tests/ray_nodes.py does) runs the step with
`ResourceConfig.with_cpu(1, replicas=2)`: a placement group, one replica per node, rank 0's address
and port found through Ray. Baseline: `python -m torch.distributed.run --standalone --nproc-per-node 2`
of the same job. They alternate for `--rounds` rounds in one run, so both see the same load; the
figure is the median of each run's per-step tokens/s after `--warmup` steps, the best round of each.
Goal: ours >= 0.9x the baseline.

Also: gang dispatch, the time from `submit` to every rank running (each rank records its start),
for a cold gang (new worker processes) and warm ones (median of 5).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

from train_cpu_throughput import build_cache  # noqa: E402

import storage  # noqa: E402
from experiments.llama import llama_30m  # noqa: E402
from fray.cluster import RayCluster, ResourceConfig  # noqa: E402
from marin.data.token_cache import TokenCache  # noqa: E402
from marin.training.config import TrainConfig  # noqa: E402
from marin.training.datasets import DatasetInput  # noqa: E402
from marin.training.launch import run_job  # noqa: E402
from marin.training.optim import AdamConfig  # noqa: E402
from marin.training.trainer import TrainJob  # noqa: E402


def _ray_nodes():
    """tests/ray_nodes.py, loaded by path (tests/ on sys.path would shadow the marin package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "ray_nodes", os.path.join(HERE, "..", "tests", "ray_nodes.py")
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["ray_nodes"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


TORCHRUN_WORKER = "from marin.training.trainer import train; import pickle, sys; train(pickle.load(open(sys.argv[1], 'rb')))"  # noqa: E501 (a script in a string)


def tokens_per_s(out: str, warmup: int) -> float:
    rows = storage.read_records(os.path.join(out, "metrics.jsonl"))
    return statistics.median(r["tokens_per_s"] for r in rows[warmup:] if "eval_loss" not in r)


def run_torchrun(job: TrainJob, folder: str) -> None:
    job_file = os.path.join(folder, "job.pkl")
    with open(job_file, "wb") as f:
        pickle.dump(job, f)
    script = os.path.join(folder, "worker.py")
    with open(script, "w") as f:
        f.write(TORCHRUN_WORKER)
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    done = subprocess.run([*torchrun, script, job_file], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(
            f"the torchrun baseline failed (exit code {done.returncode}):\n{done.stderr[-4000:]}"
        )


def _started(folder: str) -> None:
    with open(os.path.join(folder, f"start-{os.environ['RANK']}"), "w") as f:
        f.write(repr(time.time()))


def dispatch_seconds(cluster: RayCluster, folder: str) -> float:
    """Seconds from submit to the last rank of a 2-replica gang running."""
    os.makedirs(folder)
    submitted = time.time()
    cluster.submit(
        functools.partial(_started, folder), name="dispatch", resources=ResourceConfig.with_cpu(1, replicas=2)
    ).result(timeout=300)
    starts = [float(open(os.path.join(folder, f"start-{r}")).read()) for r in range(2)]
    return max(starts) - submitted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    root = tempfile.mkdtemp(prefix="bench-multinode-")
    cache = build_cache(root)
    vocab = TokenCache.open(cache).vocab_size
    config = TrainConfig(
        model=llama_30m.with_vocab_size(vocab),
        optimizer=AdamConfig(learning_rate=3e-4),
        batch_size=args.batch_size,
        seq_len=args.seq_len,
        num_train_steps=args.steps,
        cpu_threads=1,
        prefetch=2,
    )
    datasets = (DatasetInput("bench", cache, 1.0),)
    nodes = _ray_nodes().LocalRayCluster(workers=1, cpus_per_node=1).start()
    os.environ["RAY_ADDRESS"] = nodes.address
    try:
        cluster = RayCluster(max_retries=0)
        cold = dispatch_seconds(cluster, os.path.join(root, "dispatch-cold"))
        warm = statistics.median(
            dispatch_seconds(cluster, os.path.join(root, f"dispatch-{i}")) for i in range(5)
        )
        ours, baseline = [], []
        for i in range(args.rounds):
            out = os.path.join(root, f"torchrun-{i}")
            run_torchrun(TrainJob(config, datasets, out), tempfile.mkdtemp(dir=root))
            baseline.append(tokens_per_s(out, args.warmup))
            out = os.path.join(root, f"ray-{i}")
            cluster.submit(
                functools.partial(run_job, TrainJob(config, datasets, out), 1),
                name="train",
                resources=ResourceConfig.with_cpu(1, replicas=2),
            ).result(timeout=3600)
            ours.append(tokens_per_s(out, args.warmup))
        cluster.shutdown()
    finally:
        nodes.stop()
        shutil.rmtree(root, ignore_errors=True)  # the cache and every run's outputs: made by this run
    ratio = max(ours) / max(baseline)
    print(
        json.dumps(
            {
                "benchmark": "train_multinode",
                "model": "llama_30m",
                "vocab_size": vocab,
                "batch_size": args.batch_size,
                "seq_len": args.seq_len,
                "steps": args.steps,
                "warmup": args.warmup,
                "rounds": args.rounds,
                "ray_gang_2_nodes_tokens_per_s": round(max(ours), 1),
                "ray_rounds": [round(x, 1) for x in ours],
                "torchrun_2_procs_tokens_per_s": round(max(baseline), 1),
                "torchrun_rounds": [round(x, 1) for x in baseline],
                "ratio": round(ratio, 3),
                "goal_ratio": 0.9,
                "meets_goal": ratio >= 0.9,
                "gang_dispatch_cold_s": round(cold, 3),
                "gang_dispatch_warm_median_s": round(warm, 3),
                "load_average": [round(x, 2) for x in os.getloadavg()],
            }
        )
    )


if __name__ == "__main__":
    main()
