"""The README's benchmark command runs verbatim, and what it writes holds each benchmark's figure with
the load average and a verdict on its goal (timings themselves are never asserted)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

from tests.shell_env import fresh_env

ROOT = Path(__file__).resolve().parents[1]


def readme_benchmark_commands() -> list[str]:
    section = (ROOT / "README.md").read_text().split("## Benchmarks", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    return [line for line in block.splitlines() if line.strip()]


# Verbatim, as README.md shows it (tests/test_docs_commands.py looks for it here).
README_COMMAND = ".venv/bin/python benchmarks/run_all.py --quick --only execution_import execution_chain --out benchmarks/results/quick.json"  # noqa: E501


def test_the_readme_benchmark_command_writes_every_figure_with_load_and_goal():
    (command,) = readme_benchmark_commands()
    assert command == README_COMMAND
    out = ROOT / shlex.split(command)[shlex.split(command).index("--out") + 1]
    assert not out.exists(), f"{out} is in the way; it is the file this test writes"
    try:
        subprocess.run(
            command, shell=True, cwd=ROOT, env=fresh_env(), check=True, capture_output=True, timeout=600
        )
        report = json.loads(out.read_text())
    finally:
        out.unlink(missing_ok=True)
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
