#!/usr/bin/env bash
# Set up what the demo needs, then run the tiny-LLM demo pipeline end to end and print its summary.
# Arguments go to `marin run` (e.g. --force-run-failed, --prefix DIR). A second run reuses every cached step.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh demo
exec .venv/bin/python -m experiments.tutorials.demo "$@"
