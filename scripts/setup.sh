#!/usr/bin/env bash
# Create .venv (once) and install marin with every extra the demo and the tests use.
# Idempotent: a second call costs a second only, unless pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.marin-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  log=.venv/setup.log
  echo "setting up .venv (pip's output: $log)" >&2
  {
    .venv/bin/python -m pip install --upgrade pip
    # Pin torch before resolving the rest: on a CPU machine with the local wheel this is the small
    # CPU build; elsewhere PyPI serves the CUDA build of the same release. An open `torch`
    # requirement alone would pull a multi-GB CUDA build even where no GPU exists.
    .venv/bin/python -c "import torch" 2>/dev/null || .venv/bin/python -m pip install "torch==${MARIN_TORCH_VERSION:-2.13.0}"
    .venv/bin/python -m pip install -e ".[ray,hf,eval,ui,dev,infra,curation,scaling,gcs,s3]"
  } >"$log" 2>&1 || { tail -n 40 "$log" >&2; echo "setup failed; the whole log is $log" >&2; exit 1; }
  touch "$stamp"
fi
