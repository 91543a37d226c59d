#!/usr/bin/env bash
# The GPU checks in one command, for a machine with one CUDA GPU (an H100/H200 takes under 8 minutes):
#   1. tests/marin/training/test_gpu.py: bf16 FSDP on one device (trains, resumes), compile per block,
#      flex-attention document masking, the MoE's grouped matmul in bf16, KV-cached generation;
#   2. benchmarks/train_gpu_mfu.py at ~150M and ~1B (llama_150m, llama_1_4b): tokens/s, MFU and peak
#      memory against a plain PyTorch loop of the same model, in the same run.
# It prints one JSON object: {"tests": {...}, "mfu": {...}, "ok": ...}; exit 0 when both parts ran
# and the tests passed. On a GPU each part runs under `timeout` (170 s + 310 s), so the whole takes at
# most 8 minutes; a part cut short reports its rc (124) in the summary.
#
#   bash scripts/gpu_check.sh             # on the GPU machine
#   bash scripts/gpu_check.sh --dry-run   # without a GPU: the same tests on CPU and the benchmark's --smoke run
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
DRY_RUN=0
[ "${1:-}" = "--dry-run" ] && DRY_RUN=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ "$DRY_RUN" = 1 ]; then
  export MARIN_GPU_CHECK_DEVICE=cpu
  mfu_args=(--smoke --model smoke-llama smoke-moe)
  tests_limit=600 mfu_limit=600  # CPU is slow: the dry run checks the parts, not the time
else
  mfu_args=(--model llama_150m llama_1_4b --steps 30 --warmup 10)
  tests_limit=170 mfu_limit=310
fi

# the part's own timeout bounds it; the default tier's 60 s per-test guard would fail a first compile
export MARIN_TEST_CALL_LIMIT=$tests_limit
started=$(date +%s)
timeout "$tests_limit" "$PYTHON" -m pytest -q -p no:cacheprovider tests/marin/training/test_gpu.py \
  --junitxml="$work/tests.xml" >"$work/tests.log" 2>&1
tests_rc=$?
tests_seconds=$(( $(date +%s) - started ))

started=$(date +%s)
timeout "$mfu_limit" "$PYTHON" benchmarks/train_gpu_mfu.py "${mfu_args[@]}" >"$work/mfu.json" 2>"$work/mfu.log"
mfu_rc=$?
mfu_seconds=$(( $(date +%s) - started ))

"$PYTHON" - "$work" "$DRY_RUN" "$tests_rc" "$tests_seconds" "$mfu_rc" "$mfu_seconds" <<'PY'
import json, sys, xml.etree.ElementTree as ET
work, dry_run, tests_rc, tests_seconds, mfu_rc, mfu_seconds = sys.argv[1], sys.argv[2] == "1", *map(int, sys.argv[3:])
tests = {"rc": tests_rc, "seconds": tests_seconds}
try:
    suite = ET.parse(f"{work}/tests.xml").getroot()
    suite = suite if suite.tag == "testsuite" else suite[0]
    tests.update({k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")})
    tests["failed"] = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None or c.find("error") is not None]
except (OSError, ET.ParseError, IndexError):
    tests["log_tail"] = open(f"{work}/tests.log").read()[-2000:]
try:
    mfu = json.loads(open(f"{work}/mfu.json").read().strip().splitlines()[-1])
except (OSError, ValueError, IndexError):
    mfu = {"log_tail": open(f"{work}/mfu.log").read()[-2000:]}
mfu.update({"rc": mfu_rc, "seconds": mfu_seconds})
ok = tests_rc == 0 and mfu_rc == 0 and tests.get("tests", 0) > 0
print(json.dumps({"gpu_check": "dry run on CPU" if dry_run else "GPU", "tests": tests, "mfu": mfu, "ok": ok}))
sys.exit(0 if ok else 1)
PY
