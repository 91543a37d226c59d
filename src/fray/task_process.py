"""The entry point of the fresh Python process that runs one LocalCluster task (outside the
fray.cluster package, so that starting it imports nothing but cloudpickle).

`python -m fray.task_process TASK RESULT` unpickles the task from TASK, runs it, and writes
the pickled outcome to RESULT: ("ok", value) or ("error", exception-or-None, formatted traceback).
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from typing import Any

import cloudpickle


def run_task_file(task_path: str, result_path: str) -> None:
    """Run the pickled task in `task_path` and write its outcome to `result_path` atomically."""
    try:
        with open(task_path, "rb") as f:
            task = cloudpickle.load(f)
        outcome: tuple[Any, ...] = ("ok", task())
    except BaseException as exc:  # noqa: BLE001 - every failure of the task goes back to the caller
        outcome = ("error", exc, traceback.format_exc())
    try:
        data = cloudpickle.dumps(outcome)
    except Exception:  # noqa: BLE001 - an unpicklable value or exception travels as text
        if outcome[0] == "ok":
            text = f"the task returned a {type(outcome[1]).__name__} that cannot be pickled:\n{traceback.format_exc()}"
        else:
            text = outcome[2]
        data = cloudpickle.dumps(("error", None, text))
    tmp = f"{result_path}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, result_path)


def exit_when_parent_dies(poll_s: float = 0.5) -> None:
    """End this process if the one that started it dies (a killed step runner must not leave its step
    running: another runner will take the step over and must not race an orphan)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os._exit(70)

    threading.Thread(target=watch, name="fray-parent-watch", daemon=True).start()


if __name__ == "__main__":
    exit_when_parent_dies()
    run_task_file(sys.argv[1], sys.argv[2])
    sys.stdout.flush()
    sys.stderr.flush()
