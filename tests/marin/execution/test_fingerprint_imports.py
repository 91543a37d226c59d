"""One step, one key, whatever name its module was imported under (`curate`, `experiments.curate`,
`marin plan experiments/curate.py`): each way runs in a fresh interpreter."""

import json
import os
import subprocess
import sys
import textwrap

CURATE = """
from marin.execution.step_spec import StepSpec
from zephyr import Dataset
from marin.data.zephyr_step import zephyr_step

MIN_WORDS = 3
STOPWORDS = ["a", "the"]


def clean(text):
    return " ".join(w for w in text.split() if w not in STOPWORDS)


def curate_fn(output_path):
    with open(f"{output_path}/out.txt", "w") as f:
        f.write(clean("the cat sat") if len("the cat sat".split()) >= MIN_WORDS else "")


def build(context):
    return Dataset.from_list([{"text": clean("a dog")}])


curated = StepSpec(name="curated", fn=curate_fn, hash_attrs={"lr": 1.0})
pipeline = zephyr_step("pipeline", build)
"""

PRINT_KEYS = """
import json, sys
from marin.execution.step_runner import StepRunner
module = __import__(sys.argv[1], fromlist=["curated"])
plan = StepRunner(prefix=sys.argv[2], progress=False).plan([module.curated, module.pipeline])
print(json.dumps({s.name: [s.key, s.state] for s in plan.steps}))
"""


def _plan_via_import(root, sys_path, module, prefix):
    """{step name: [key, state]} as planned by a fresh interpreter that imports the steps as `module`."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(sys_path), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, "-c", PRINT_KEYS, module, str(prefix)],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def _experiment_package(root):
    """`root/experiments/` (a package) holding curate.py."""
    package = root / "experiments"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "curate.py").write_text(textwrap.dedent(CURATE))
    return package


def _keys_via_import(root, sys_path, module, prefix):
    return {name: key for name, (key, _) in _plan_via_import(root, sys_path, module, prefix).items()}


def test_one_step_has_one_key_under_every_import_name(tmp_path):
    package = _experiment_package(tmp_path)
    prefix = tmp_path / "outputs"

    as_top_level = _keys_via_import(tmp_path, package, "curate", prefix)
    as_package_module = _keys_via_import(tmp_path, tmp_path, "experiments.curate", prefix)
    planned = subprocess.run(
        [
            sys.executable,
            "-m",
            "marin.cli",
            "plan",
            str(package / "curate.py"),
            "--prefix",
            str(prefix),
            "--json",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    under_marin = {s["name"]: s["key"] for s in json.loads(planned)["steps"]}

    assert as_top_level == as_package_module == under_marin
    assert set(as_top_level) == {"curated", "pipeline"}


def test_a_changed_json_global_changes_the_key_under_every_import_name(tmp_path):
    package = _experiment_package(tmp_path)
    before = _keys_via_import(tmp_path, tmp_path, "experiments.curate", tmp_path / "out")
    (package / "curate.py").write_text(textwrap.dedent(CURATE).replace("MIN_WORDS = 3", "MIN_WORDS = 4"))
    after = _keys_via_import(tmp_path, tmp_path, "experiments.curate", tmp_path / "out")
    assert before["curated"] != after["curated"]  # curate_fn reads MIN_WORDS
    assert before["pipeline"] == after["pipeline"]  # build does not read it
    (package / "curate.py").write_text(textwrap.dedent(CURATE).replace('["a", "the"]', '["a", "an", "the"]'))
    changed_helper_global = _keys_via_import(tmp_path, tmp_path, "experiments.curate", tmp_path / "out")
    # clean() reads STOPWORDS; both steps call clean(): a global read by a same-package callee counts
    assert changed_helper_global["curated"] != before["curated"]
    assert changed_helper_global["pipeline"] != before["pipeline"]


def test_steps_run_by_marin_run_are_cached_when_imported_elsewhere(tmp_path):
    package = _experiment_package(tmp_path)
    prefix = tmp_path / "outputs"
    subprocess.run(
        [sys.executable, "-m", "marin.cli", "run", str(package / "curate.py"), "--prefix", str(prefix)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    for sys_path, module in ((package, "curate"), (tmp_path, "experiments.curate")):
        states = {
            name: state for name, (_, state) in _plan_via_import(tmp_path, sys_path, module, prefix).items()
        }
        assert states == {"curated": "cached", "pipeline": "cached"}
