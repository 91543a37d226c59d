#!/usr/bin/env bash
# Set up, then run the test suite's default tier; `--all` adds the slow tier (docs/testing.md).
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Style first: it takes seconds, and a failure names the file and line to fix.
.venv/bin/ruff check src tests benchmarks experiments scripts infra
.venv/bin/ruff format --check src tests benchmarks experiments scripts infra
# The layering contracts of pyproject.toml ([tool.importlinter]; docs/architecture.md).
.venv/bin/lint-imports
set +e
# Two workers (MARIN_TEST_WORKERS; 0 runs in this process), each test sent where it is free, except that
# the tests of one xdist_group go to one worker, in order (tests/scheduling.py).
.venv/bin/python -m pytest -n "${MARIN_TEST_WORKERS:-2}" --dist loadgroup "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: treating that as a failure, since the suite is never empty." >&2
  exit 1
fi
exit "$rc"
