"""A killed evaluation resumes without rescoring anything it wrote, with any number of processes.

`marin run` of an experiment (500 documents and a harness task) in its own process group, SIGKILLed
once at least a third of the items are in its score cache; the rerun scores only the rest (counted
by the step: `results.json` `score_cache`) and its results equal an uninterrupted run's exactly.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from marin.evaluation.results import read_results
from marin.evaluation.score_cache import CACHE_DIR
from tests.marin.evaluation.tiny_hf import build_tiny_export, held_out_stories

REPO = Path(__file__).resolve().parents[3]
DOCUMENTS = 500
EXPERIMENT = """
import os

from fray.cluster import ResourceConfig
from marin.evaluation.documents import TextDataset
from marin.experiment.evaluate import evaluate

ev = evaluate(
    "eval/resume",
    model=os.environ["RESUME_MODEL"],
    datasets=[TextDataset("stories", (os.environ["RESUME_DATA"],))],
    harness_tasks=("marin_story_endings",),
    harness_items=24,
    batch_size=4,
    score_flush_s=0,
    num_processes=int(os.environ.get("RESUME_PROCESSES", "1")),
    resources=ResourceConfig(cpu=1),
)
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("resume")
    model = build_tiny_export(root / "model", context=48, width=96, layers=2)
    data = root / "stories.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in held_out_stories(DOCUMENTS)))
    (root / "exp.py").write_text(EXPERIMENT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MARIN_PREFIX")}
    env.update(RESUME_MODEL=str(model), RESUME_DATA=str(data), PATH=f"{REPO / '.venv' / 'bin'}:{env['PATH']}")
    reference = root / "reference"
    done = _run(root, reference, env)
    assert done.returncode == 0, done.stderr[-3000:]
    return root, env, _output(reference)


def _run(root: Path, prefix: Path, env: dict, **popen) -> subprocess.CompletedProcess | subprocess.Popen:
    command = ["marin", "run", str(root / "exp.py"), "--prefix", str(prefix)]
    if popen:
        return subprocess.Popen(command, cwd=root, env=env, start_new_session=True, **popen)
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=600)


def _output(prefix: Path) -> Path:
    (found,) = (prefix / "eval").glob("resume-*")
    return found


def _entries(cache: Path) -> int:
    total = 0
    for part in cache.glob("part-*.jsonl") if cache.is_dir() else ():
        total += part.read_bytes().count(b"\n")
    return total


@pytest.mark.parametrize("processes", [1, 2], ids=["same-processes", "two-processes-on-rerun"])
def test_a_sigkilled_evaluation_resumes_without_rescoring_and_equals_an_uninterrupted_run(setup, processes):
    root, env, reference = setup
    full = read_results(str(reference))
    total = full.score_cache.computed
    assert total > DOCUMENTS  # every window of every document, and every harness request

    prefix = root / f"killed-{processes}"
    proc = _run(root, prefix, env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while True:
        outputs = list((prefix / "eval").glob("resume-*")) if (prefix / "eval").is_dir() else []
        if outputs and _entries(outputs[0] / CACHE_DIR) * 3 >= total:
            break
        assert proc.poll() is None, "the evaluation ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    killed = outputs[0]
    kept = _entries(killed / CACHE_DIR)
    assert kept < total and not (killed / "results.json").exists(), (
        "the kill landed after the end: proves nothing"
    )

    rerun = _run(root, prefix, {**env, "RESUME_PROCESSES": str(processes)})
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    resumed = read_results(str(killed))
    assert (resumed.score_cache.computed, resumed.score_cache.resumed) == (total - kept, kept)
    assert resumed.perplexity == full.perplexity and resumed.harness == full.harness
    assert (killed / "items.json").read_bytes() == (reference / "items.json").read_bytes()
    assert (killed / "documents.jsonl").read_bytes() == (reference / "documents.jsonl").read_bytes()
    assert sorted(p.name for p in (killed / CACHE_DIR).iterdir()) == ["scores.jsonl"]
