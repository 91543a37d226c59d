"""The engine stays light: importing the runner pulls in no torch, ray or transformers."""

import subprocess
import sys


def test_step_runner_import_pulls_in_no_heavy_libraries():
    code = (
        "import sys, marin.execution.step_runner, marin.execution.plan, marin.cli\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in {'torch', 'ray', 'transformers', 'rich'})\n"
        "print(heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
