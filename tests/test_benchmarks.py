"""docs/benchmarks.md's benchmark command runs verbatim, and what it writes holds each benchmark's figure with
the load average and a verdict on its goal (timings themselves are never asserted)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.shell_env import fresh_env, fresh_project_copy

ROOT = Path(__file__).resolve().parents[1]


def readme_benchmark_commands() -> list[str]:
    section = (ROOT / "docs" / "benchmarks.md").read_text().split("\n## ", 1)[0]
    (block,) = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    return [line for line in block.splitlines() if line.strip()]


# Verbatim, as docs/benchmarks.md shows it (tests/test_docs_commands.py looks for it here).
README_COMMAND = ".venv/bin/python benchmarks/run_all.py --quick --only execution_import execution_chain --out benchmarks/results/quick.json"  # noqa: E501


def test_the_readme_benchmark_command_writes_every_figure_with_load_and_goal(tmp_path):
    (command,) = readme_benchmark_commands()
    assert command == README_COMMAND
    # In a copy of the project, as a clone has it: the command's --out is a path inside the tree,
    # and the suite writes nothing into the checkout it tests.
    project = tmp_path / "marin"
    fresh_project_copy(project)
    out = project / shlex.split(command)[shlex.split(command).index("--out") + 1]
    assert not out.exists(), f"{out} is in the way; it is the file this test writes"
    subprocess.run(
        command, shell=True, cwd=project, env=fresh_env(), check=True, capture_output=True, timeout=600
    )
    report = json.loads(out.read_text())
    assert report["quick"] is True and report["machine"]["cpu_count"] >= 1
    assert set(report["benchmarks"]) == {"execution_import", "execution_chain"}
    for name, outcome in report["benchmarks"].items():
        result = outcome["result"]
        assert result["benchmark"] == name
        assert any(key.startswith("load_average") for key in result), result
        assert isinstance(outcome["goal_met"], bool), outcome
    chain = report["benchmarks"]["execution_chain"]["result"]
    assert chain["fresh_interpreter_per_run"] and chain["cold_chain_local_cluster_s"] > 0
    assert chain["plain_loop_s"] > 0 and chain["ratio_local_vs_plain_loop"] > 0


def test_the_gpu_mfu_benchmark_checks_fsdp_on_every_architecture_in_its_cpu_smoke_mode():
    import sys

    from experiments.models import DENSE_SIZES

    script = str(ROOT / "benchmarks" / "train_gpu_mfu.py")
    done = subprocess.run(
        [sys.executable, script, "--smoke"], cwd=ROOT, capture_output=True, text=True, timeout=600, check=True
    )
    result = json.loads(done.stdout.splitlines()[-1])
    assert (result["benchmark"], result["smoke"], result["parallelism"]) == ("train_gpu_mfu", True, "fsdp")
    assert {"smoke-llama", "smoke-qwen3", "smoke-olmo2"} <= set(result["models"])
    for name, figures in result["models"].items():
        assert figures["architecture"] == name.removeprefix("smoke-")
        assert figures["marin_tokens_per_s"] > 0 and figures["plain_pytorch_tokens_per_s"] > 0
        assert figures["ratio"] > 0 and 0 < figures["marin_mfu"] < 1 and figures["meets_goal"] is None
        assert "marin_peak_memory_gib" in figures  # None off CUDA
    assert len(result["load_average"]) == 3 and result["meets_goal"] is None
    if not _has_cuda():  # the full run here: a line saying so, not a traceback
        done = subprocess.run([sys.executable, script], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        full = json.loads(done.stdout.splitlines()[-1])
        assert full["note"].startswith("not measured: no device") and full["meets_goal"] is None
        assert set(DENSE_SIZES) <= set(full["models"]) and not any(full["models"].values())


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def run_quick(names: list[str], out: Path) -> dict[str, dict]:
    """Benchmarks through one run_all.py --quick; {name: its outcome as the report records it}."""
    subprocess.run(
        [sys.executable, "benchmarks/run_all.py", "--quick", "--only", *names, "--out", str(out)],
        cwd=ROOT,
        env=fresh_env(),
        check=True,
        capture_output=True,
        timeout=900,
    )
    outcomes = json.loads(out.read_text())["benchmarks"]
    for name in names:
        assert "result" in outcomes[name], outcomes[name]
        result = outcomes[name]["result"]
        assert result["benchmark"] == name and "load_average" in result, result
    return outcomes


# Each curation benchmark and the figures it must report; one run_all.py run checks them all.
CURATION_FIGURES = {
    "curation_minhash_quality": ("recall", "precision", "step_recall", "step_drops_equal_in_memory"),
    "curation_memory": ("peak_rss_gib", "removed", "docs_per_s"),
    "curation_scaling": ("one_worker_pages_per_s", "two_workers_pages_per_s", "speedup"),
}


def test_each_curation_benchmark_runs_quick_and_reports_its_figures(tmp_path):
    outcomes = run_quick(list(CURATION_FIGURES), tmp_path / "report.json")
    for name, figures in CURATION_FIGURES.items():
        outcome = outcomes[name]
        assert isinstance(outcome["goal_met"], bool), (name, outcome)
        assert all(key in outcome["result"] for key in figures), (name, outcome["result"])


def test_the_datatrove_comparison_runs_quick_where_datatrove_is_installed(tmp_path):
    python = os.environ.get("DATATROVE_PYTHON", "/tmp/dt/bin/python")
    outcome = run_quick(["curation_vs_datatrove"], tmp_path / "report.json")["curation_vs_datatrove"]
    result = outcome["result"]
    if "skipped" in result:
        assert python in result["skipped"]
        pytest.skip(f"datatrove's environment is not built here: {result['skipped']}")
    assert result["minhash"]["lsh"]["ours"]["bands"] == result["minhash"]["lsh"]["datatrove"]["bands"]
    assert 0 <= result["gopher"]["agreement"] <= 1 and isinstance(outcome["goal_met"], bool)
