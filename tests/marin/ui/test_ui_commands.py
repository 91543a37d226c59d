"""`marin ui` as a real process: the commands README.md and docs/ui.md show, run verbatim."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from ports import fixed_ports

from tests.shell_env import fresh_env

REPO = Path(__file__).resolve().parents[3]
# `marin ui` serves on 8642 unless told otherwise, and docs/ui.md's command on 8643: these tests run on
# the fixed ports' pytest-xdist worker, each holding the ports while it runs (tests/ports.py).
pytestmark = pytest.mark.xdist_group("fixed-ports")


def documented_commands() -> list[str]:
    """Every `marin ui` line of a bash block in README.md and docs/ui.md, comment stripped."""
    commands = []
    for doc in ("README.md", "docs/ui.md"):
        for block in re.findall(r"```bash\n(.*?)```", (REPO / doc).read_text(), re.S):
            for line in block.splitlines():
                command = line.split("  #", 1)[0].strip()
                if re.search(r"(^|\s)marin ui\b", command):
                    commands.append(command)
    return commands


@pytest.fixture(scope="module")
def prefix(tmp_path_factory) -> Path:
    from fray.cluster import ThreadCluster
    from marin.execution.step_runner import StepRunner
    from marin.execution.step_spec import StepSpec

    out = tmp_path_factory.mktemp("cli") / "outputs"
    StepRunner(prefix=str(out), cluster=ThreadCluster(), progress=False).run(
        [StepSpec(name="hello", fn=dict)]
    )
    return out


def _get(url: str) -> tuple[int, str]:
    """GET as a browser would: following the token redirect with the cookie it sets."""
    import http.cookiejar

    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    try:
        with opener.open(url, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_docs_show_the_commands_this_test_runs():
    assert "marin ui" in documented_commands()
    assert documented_commands() == [  # README's one, and docs/ui.md's four
        "marin ui",
        "marin ui",
        "marin ui --experiment experiments/tutorials/demo.py",
        "MARIN_UI_TOKEN=change-me marin ui --host 0.0.0.0 --port 8643",
        "marin ui --host 0.0.0.0",
    ]


@pytest.mark.parametrize("command", sorted(set(documented_commands())))
def test_documented_command_runs(command, prefix):
    with fixed_ports(8642, 8643):
        _run_documented(command, prefix)


def _run_documented(command: str, prefix: Path) -> None:
    env = fresh_env(MARIN_PREFIX=str(prefix))
    proc = subprocess.Popen(
        ["bash", "-c", command], cwd=REPO, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        if "--host 0.0.0.0" in command and "TOKEN" not in command:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 2 and "--token" in err, err
            return
        line = proc.stderr.readline()
        match = re.search(r"Marina serves (\S+) at (\S+)", line)
        assert match, line
        assert match.group(1) == str(prefix)
        url = match.group(2)
        status, page = _get(url)
        assert status == 200 and "hello" in page
        if "token=" in url:
            assert "0.0.0.0:8643" in url
            assert _get(url.split("?")[0])[0] == 401  # without the token (and so without its cookie)
        if "--experiment" in command:
            status, plan = _get(url + "experiment")
            assert status == 200 and "tokenized/tinystories" in plan and "run: new" in plan
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
