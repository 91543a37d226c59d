#!/usr/bin/env bash
# Set up, then run the tiny-LLM demo pipeline end to end. A second run reuses every cached step.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m experiments.tutorials.demo "$@"
