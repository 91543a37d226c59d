"""rayconnect: the one way fray, zephyr and `marin submit` connect a process to Ray. Each case runs in a
fresh interpreter, since Ray reads RAY_AUTH_MODE once per process and the helpers change it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


def _run(code: str, env: dict[str, str], cwd: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env={**env, "PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _env_without_ray_auth(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    return env | {"HOME": str(home)}  # ~/.ray/auth_token: none unless a test writes one


def test_importing_rayconnect_loads_neither_ray_nor_any_package_of_ours(tmp_path):
    seen = _run(
        "import json, sys, rayconnect; ours = {'ray', 'marin', 'zephyr', 'fray', 'storage', 'procpool'}; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & ours)))",
        _env_without_ray_auth(tmp_path),
        tmp_path,
    )
    assert seen == []


def test_user_code_paths_are_the_drivers_own_folders_once_each_and_never_the_installation(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (tmp_path / "link").symlink_to(code)
    script = (
        "import json, sys, sysconfig, rayconnect; "
        f"sys.path[:0] = [{str(code)!r}, {str(tmp_path / 'link')!r}, {str(tmp_path / 'missing')!r}, "
        "sysconfig.get_paths()['purelib'], '']; "
        "print(json.dumps(rayconnect.user_code_paths()))"
    )
    paths = _run(script, _env_without_ray_auth(tmp_path), tmp_path)
    assert paths[:2] == [str(code.resolve()), str(tmp_path.resolve())]  # '' is the working directory
    assert str(SRC) in paths  # PYTHONPATH: code outside the installation, as a user's would be
    prefixes = [os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)]
    assert not [p for p in paths if any(p == q or p.startswith(q + os.sep) for q in prefixes)]
    assert len(paths) == len(set(paths))


CHECK_TOKEN = (
    "import json, os, rayconnect; on = rayconnect.use_token_if_available(); "
    "print(json.dumps([on, os.environ.get('RAY_AUTH_MODE')]))"
)


@pytest.mark.parametrize(("mode", "expected"), [("token", True), ("disabled", False), ("TOKEN", True)])
def test_an_explicit_auth_mode_is_kept_as_it_is(tmp_path, mode, expected):
    pytest.importorskip("ray")
    env = _env_without_ray_auth(tmp_path) | {"RAY_AUTH_MODE": mode, "RAY_AUTH_TOKEN": "x" * 32}
    assert _run(CHECK_TOKEN, env, tmp_path) == [expected, mode]


def test_token_mode_is_turned_on_when_a_token_file_exists_and_left_off_without_one(tmp_path):
    pytest.importorskip("ray")
    env = _env_without_ray_auth(tmp_path)
    assert _run(CHECK_TOKEN, env, tmp_path) == [False, None]
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text("a" * 32)
    assert _run(CHECK_TOKEN, env, tmp_path) == [True, "token"]
