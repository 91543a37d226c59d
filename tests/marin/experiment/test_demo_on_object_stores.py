"""The README demo end to end with its prefix on a bucket (moto's S3 server, fake-gcs-server; real s3fs and
gcsfs), then a fully cached plan: the model export comes to the local export cache, the harness's task
files live in a local work folder, and what the evaluation keeps is on the bucket. The training is
shortened (MARIN_DEMO_TRAIN_STEPS); every step is the demo's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from object_stores import conditional_create_missing, environment, gcs_server, s3_server

import storage

REPO = Path(__file__).resolve().parents[3]


# The same demo on both stores: the default tier runs it on S3; GCS (whose steps the object-store
# tests cover) in the slow tier.
@pytest.mark.parametrize(
    "server_of",
    [pytest.param(s3_server, id="s3"), pytest.param(gcs_server, marks=pytest.mark.slow, id="gcs")],
)
@pytest.mark.call_limit(120)
def test_demo_runs_on_a_bucket_then_plans_fully_cached(server_of, tmp_path):
    with server_of() as server, environment(server.env):
        prefix = f"{server.scheme}://{server.bucket}/{uuid.uuid4().hex[:8]}"
        if why := conditional_create_missing(prefix):
            pytest.skip(why)
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("MARIN_TOKENIZER", "MARIN_PREFIX", "MARIN_EXPORT_CACHE")
        }
        env.update(
            server.env,
            MARIN_PREFIX=prefix,
            MARIN_DEMO_TRAIN_STEPS="4",
            MARIN_EXPORT_CACHE=str(tmp_path / "export-cache"),
        )
        demo = subprocess.run(
            [sys.executable, "-m", "experiments.tutorials.demo"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert demo.returncode == 0, demo.stderr[-4000:]
        assert "evaluation               bpb = " in demo.stdout and "95% interval" in demo.stdout

        evaluations = storage.join(prefix, "evaluations")
        (name,) = storage.list_names(evaluations)
        out = storage.join(evaluations, name)
        results = json.loads(storage.read_bytes(storage.join(out, "results.json")))
        assert results["hf_path"].startswith(f"{server.scheme}://")
        acc = results["harness"]["marin_story_endings"]["acc"]
        assert acc["n"] == 50 and acc["ci95"][0] <= acc["value"] <= acc["ci95"][1]
        kept = set(storage.list_names(out))
        assert {"results.json", "items.json", "samples.jsonl", "harness", "harness_samples"} <= kept
        assert storage.exists(storage.join(out, "harness", "tasks", "marin_story_endings.yaml"))
        (entry,) = [e for e in os.listdir(tmp_path / "export-cache") if not e.startswith(".")]
        assert (tmp_path / "export-cache" / entry / "config.json").exists()

        plan = subprocess.run(
            [sys.executable, "-m", "marin.cli", "plan", "experiments/tutorials/demo.py", "--json"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert plan.returncode == 0, plan.stderr[-3000:]
        states = {step["name"]: step["state"] for step in json.loads(plan.stdout)["steps"]}
        assert set(states.values()) == {"cached"}, states
