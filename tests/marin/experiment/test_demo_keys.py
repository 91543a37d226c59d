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

# Why each pin last moved (issue 11; the keys at 5448380, before it, in brackets). Found by computing the
# key records at every commit since and diffing the functions each fingerprint covers (docs/execution.md,
# "Why keys change when library code changes"):
# - tokenizers/marin-demo-bpe [a559a223]: code fingerprint only. Its fn, run_with_step_inputs, reaches
#   marin.data.step_inputs.step_output_files, which now lists a dependency's files with storage.glob
#   instead of zephyr.fileio.list_files plus a PlanError catch (2d2d66a, the storage package). Moving
#   step_inputs from marin.experiment to marin.data (8a42ce8) did not count: module names are not keyed.
# - tokenized/tinystories [4cfa16f9]: the same code change (the same fn), and its dependency, the
#   tokenizer, has a new key.
# - checkpoints/marin-nano-tinystories [99f87df4]: its dependency (tokenized) only; version="v1" and
#   hash_attrs unchanged (the TrainLm handle derives the same hash_attrs as the old train_lm).
# - evaluations/marin-nano-tinystories [5fa535cf]: batch_size left hash_attrs on purpose (bbab887: scores
#   do not depend on it); find_hf_export reads the typed StatusRecord/ArtifactRecord and StepState.SUCCESS
#   instead of dicts and status.SUCCESS (b7ba8ae, typed records); both of its dependencies have new keys.
#
# They moved once more, with the curation work (issue 15; the keys just before in brackets): the tokenizer
# [ee912dfe] and tokenize [bfd031e3] steps' shared fn reaches step_output_files again, which now leaves out
# a dependency's "_"-folders (a curation step's _rejected/ documents are not its data): what the step
# reads changed, so its code fingerprint did. The checkpoint [c8d8dddd] and evaluation [8da7556c] moved
# only through their dependencies.
#
# The evaluation's key moved once more with issue 22 (c1bcc9fb before it), on purpose: `model_step` became
# `model` (a step, a folder or a hub id; the step keyed as {"step": name}), and the step's function now
# brings remote exports to a local cache, keeps per-item scores and puts an interval on every number, so
# its code fingerprint changed. The tokenizer, token cache and checkpoint keys did not move.
#
# The evaluation's key moved once more with issue 26 (7f433e6a before it): the step's function scores
# exact match on chat prompts when asked (`exact_match=`, None by default and so not in hash_attrs),
# so its code fingerprint changed; hash_attrs and the other keys did not move.
#
# The evaluation's key moved once more with issue 31 (970778e0 before it), on purpose: the step writes
# results.json and items.json as the typed result schema (marin.evaluation.results: every metric with
# its direction and aggregation, exact-match items with ids), which an older output does not hold, so
# its code fingerprint changed. Its hash_attrs and the other keys did not move.
#
# The evaluation's key moved once more with issue 35 (59f5b9dc before it), on purpose: the step keeps a
# per-item score cache it resumes from, writes documents.jsonl (each document's bpb by byte class) and a
# self-contained harness folder, and generates with our KV-cached decoder, so its code fingerprint
# changed. Its hash_attrs (checked equal before and after) and the other keys did not move. It moved
# once more (049dd07a before it) when load_hf_model began building under the process-wide transformers
# build lock (marin.data.hf_models): code fingerprint only.
DEMO_KEYS = {
    "tokenizers/marin-demo-bpe": "5bfd640ac6d6cdf5a7c3412e08d516ea0962735441b4d4e8c9669481c247222a",
    "tokenized/tinystories": "3ee4c0639ea5009c6a4d1c724b75efe7a685efe29db18a3dee9f86fdf54c589d",
    "checkpoints/marin-nano-tinystories": "7e07eed7ec81312b99235d1b2159c0b9ce5c5f8843b7cf3fea8d66bfe532bd91",
    "evaluations/marin-nano-tinystories": "64f8f11ca2a3e9305f692cb49fabcf4452b50565b26ab3c11fac28f3d69bacdb",
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
