"""`scripts/gpu_check.sh --dry-run` runs every GPU check on CPU and prints the summary a GPU run prints."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # trains FSDP twice and runs the MFU benchmark's smoke mode: a few minutes of CPU
def test_the_gpu_check_dry_run_passes_its_checks_on_cpu_and_prints_one_json_summary():
    done = subprocess.run(
        ["bash", "scripts/gpu_check.sh", "--dry-run"], cwd=ROOT, capture_output=True, text=True, timeout=1300
    )
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert done.returncode == 0, summary
    assert summary["gpu_check"] == "dry run on CPU" and summary["ok"] is True
    assert (
        summary["tests"]["tests"] == 8
        and summary["tests"]["failures"] == 0
        and summary["tests"]["skipped"] == 0
    )
    assert summary["mfu"]["smoke"] is True and set(summary["mfu"]["models"]) == {"smoke-llama", "smoke-moe"}
