"""deploy/Dockerfile installs the extras that every command run from its image needs.

The image runs `marin ui` on Cloud Run (infra/marin_infra/ui.py) and the Ray pods of the GKE
cluster, which run marin steps against the bucket (a gs:// prefix). Each command is started here
for real in a fresh process, which reports the distributions it loaded; each of those that is not a
core dependency must come with an extra the image installs. No Pulumi needed: the Cloud Run command
is read from the program's source.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Started in a fresh interpreter; each prints the third-party distributions it has loaded, as JSON.
REPORT = textwrap.dedent("""
    import importlib.metadata, json, os, sys
    def report():
        by_module = importlib.metadata.packages_distributions()
        loaded = {d for m in list(sys.modules) for d in by_module.get(m.split(".")[0], ())}
        print(json.dumps(sorted(loaded)), flush=True)
        os._exit(0)
""")
UI_SERVES = REPORT + textwrap.dedent("""
    import storage
    from marin.cli import main
    from marin.ui import server
    storage.fs_and_path("gs://marin-bucket/outputs")  # MARIN_PREFIX on Cloud Run is the bucket
    original = server.serve
    def serve(config, host="127.0.0.1", port=8642, on_ready=print):
        original(config, host, port, on_ready=lambda url: report())  # report once it listens
    server.serve = serve
    main(sys.argv[1:])  # the words after `marin`
""")
RAY_POD_RUNS_A_STEP = REPORT + textwrap.dedent("""
    import storage
    from fray.cluster.ray_cluster import RayCluster  # what a pod's worker runs a step through
    import ray
    storage.fs_and_path("gs://marin-bucket/outputs")  # the steps' prefix is the bucket
    report()
""")


def _image_extras() -> set[str]:
    dockerfile = (REPO / "deploy" / "Dockerfile").read_text()
    (extras,) = re.findall(r'pip install [^\n]*-e "\.\[([^\]]*)\]"', dockerfile)
    return {e.strip() for e in extras.split(",")}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_names(requirements: list[str]) -> set[str]:
    return {_normal(re.match(r"[A-Za-z0-9_.-]+", r).group(0)) for r in requirements}


def _pyproject() -> tuple[set[str], dict[str, set[str]]]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    core = _requirement_names(project["dependencies"])
    extras = {name: _requirement_names(reqs) for name, reqs in project["optional-dependencies"].items()}
    return core, extras


def _missing_extras(loaded: list[str], image: set[str] | None = None) -> dict[str, list[str]]:
    """{distribution: the extras that would bring it} for each loaded one the image lacks."""
    core, extras = _pyproject()
    image = _image_extras() if image is None else image
    missing = {}
    for dist in map(_normal, loaded):
        providers = sorted(name for name, dists in extras.items() if dist in dists)
        if dist in core or not providers or image & set(providers):
            continue  # a core dependency, a dependency of one, or brought by an extra the image has
        missing[dist] = providers
    return missing


def _loaded_by(script: str, *args: str, cwd: Path) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", script, *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _cloud_run_command() -> list[str]:
    source = (REPO / "infra" / "marin_infra" / "ui.py").read_text()
    (command,) = re.findall(r"^UI_COMMAND = '(.*)'$", source, re.M)
    words = command.split()
    assert words[:3] == ["exec", "marin", "ui"], command
    return words[2:]


def test_the_cloud_run_command_serves_the_ui_with_the_image_extras(tmp_path):
    from ports import free_port

    args = _cloud_run_command()  # ui "$MARIN_PREFIX" --host 0.0.0.0 --port "$PORT" --token ...
    values = {'"$MARIN_PREFIX"': str(tmp_path), '"$PORT"': str(free_port()), '"$MARIN_UI_TOKEN"': "t0ken"}
    args = [values.get(a, a) for a in args]
    loaded = _loaded_by(UI_SERVES, *args, cwd=tmp_path)
    assert {"starlette", "jinja2", "uvicorn", "gcsfs"} <= set(map(_normal, loaded))  # it really served
    assert _missing_extras(loaded) == {}


def test_a_ray_pod_running_a_step_on_the_bucket_has_the_image_extras(tmp_path):
    pytest.importorskip("ray")
    loaded = _loaded_by(RAY_POD_RUNS_A_STEP, cwd=tmp_path)
    assert {"ray", "gcsfs"} <= set(map(_normal, loaded))
    assert _missing_extras(loaded) == {}


def test_an_extra_left_out_of_the_image_is_named_with_the_distribution_it_needs():
    without_ui = _image_extras() - {"ui"}
    assert _missing_extras(["uvicorn", "numpy", "anyio"], without_ui) == {"uvicorn": ["ui"]}
    assert _missing_extras(["uvicorn", "numpy", "anyio"]) == {}
