"""experiments/tutorials/curate.py runs end to end, offline, on a small web-synth, and reports each stage."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def docs_commands() -> list[str]:
    text = (REPO / "docs" / "curation.md").read_text()
    return [
        line
        for block in re.findall(r"```bash\n(.*?)```", text, re.DOTALL)
        for line in block.splitlines()
        if line
    ]


def test_the_curation_tutorial_runs_verbatim_from_the_docs_and_catches_what_the_generator_planted(tmp_path):
    assert (
        docs_commands()[0] == "CURATE_PAGES=400 CURATE_TRAIN_STEPS=2 python -m experiments.tutorials.curate"
    )
    env = os.environ | {
        "MARIN_PREFIX": str(tmp_path / "prefix"),
        "HF_HUB_OFFLINE": "1",
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    done = subprocess.run(
        ["bash", "-c", docs_commands()[0]],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {
        m[0]: tuple(map(int, m[1:]))
        for m in re.findall(
            r"^(\w+)\s+in\s+(\d+)\s+removed\s+(\d+)\s+expected\s+(\d+)\s+caught\s+(\d+)",
            done.stdout,
            re.MULTILINE,
        )
    }
    assert set(rows) == {"extract", "language", "quality", "dedup"}
    for stage in ("language", "quality", "dedup"):
        _, _removed, expected, caught = rows[stage]
        assert expected > 0 and caught >= 0.9 * expected, (stage, rows[stage])
    assert "trained on" in done.stdout and "evaluation bpb" in done.stdout
