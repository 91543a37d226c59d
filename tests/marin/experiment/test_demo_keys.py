"""The cache keys of the demo's steps are pinned: a refactor that changes one would rerun every user's demo.

A key changes on purpose only with a change of key policy (say so in the change's note, then update
the pin here). The keys are computed in a fresh interpreter, as `marin plan` computes them, with the
default (trained) demo tokenizer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

DEMO_KEYS = {
    "tokenizers/marin-demo-bpe": "a559a2230db00d43727e7a4f26fedd4d6ecad5d6cdae4cd2bea3625d89ac09fb",
    "tokenized/tinystories": "4cfa16f92044a75be65fb73ba2ec7be1bff58900c4d52777cc89b5f4e91586ca",
    "checkpoints/marin-nano-tinystories": "99f87df42c4b86b618fdf634b817afd42415866378a77e7b504822ecb6e90f6f",
    # changed once on purpose: the evaluation's batch_size left the key (scores do not depend on it)
    "evaluations/marin-nano-tinystories": "c61ed104778c8507a1865ced6207adef4058984398a579caca2b87aa35d64c1a",
}

PRINT_KEYS = """
import json, sys, tempfile
from experiments.tutorials import demo
from marin.execution.lazy import lower
from marin.execution.step_runner import StepRunner

with tempfile.TemporaryDirectory() as prefix:
    plan = StepRunner(prefix=prefix, progress=False).plan(
        [lower(demo.nano_tinystories_model), lower(demo.nano_tinystories_eval)]
    )
    json.dump({step.name: step.key for step in plan.steps}, sys.stdout)
"""


def test_the_demo_steps_keep_their_cache_keys(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("MARIN_TOKENIZER", "MARIN_PREFIX")}
    done = subprocess.run(
        [sys.executable, "-c", PRINT_KEYS], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == DEMO_KEYS
