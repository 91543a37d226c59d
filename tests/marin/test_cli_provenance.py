"""`marin verify`, `marin diff`, and a plan that never runs: real experiment files, the real `marin` process."""

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.shell_env import fresh_env

REPO = Path(__file__).resolve().parents[2]
CUSTOM_STEP = REPO / "experiments" / "tutorials" / "custom_step.py"

EXPERIMENT = textwrap.dedent("""
    from pathlib import Path
    from marin.execution.step_spec import StepSpec
    from marin.execution.step_runner import StepRunner

    def write(path, words):
        Path(path, "words.txt").write_text(" ".join(words))
        Path(path, "sub").mkdir()
        Path(path, "sub", "count.txt").write_text(str(len(words)))

    def make_a(path):
        write(path, ["alpha", "beta"])

    def make_b(path):
        write(path, ["gamma"])

    a = StepSpec(name="a", fn=make_a, hash_attrs={"lang": "en"})
    b = StepSpec(name="b", fn=make_b, deps=[a])
    result = StepRunner().run([a, b])  # at top level, as experiments/tutorials/custom_step.py does
    print("b would write to", result.output_path(b))
""")


def marin(*args, cwd):
    env = {**os.environ, "MARIN_PREFIX": ""}
    return subprocess.run(
        [sys.executable, "-m", "marin.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _output(prefix: Path, name: str) -> Path:
    (path,) = [p for p in prefix.glob(f"{name}-*") if ".superseded-" not in p.name]
    return path


def test_plan_of_a_file_that_calls_run_at_top_level_runs_nothing(tmp_path):
    planned = marin("plan", str(CUSTOM_STEP), "--prefix", "out", "--json", cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr
    assert [(s["name"], s["state"]) for s in json.loads(planned.stdout)["steps"]] == [
        ("preprocess", "run: new")
    ]
    assert not (tmp_path / "out").exists()  # nothing ran, not even the output folder was made

    ran = marin("run", str(CUSTOM_STEP), "--prefix", "out", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "done: 1 succeeded" in ran.stderr  # once: the top-level call only declared it
    status = json.loads((tmp_path / "out/outputs/preprocess/.executor_status").read_text())
    assert [e["state"] for e in status["events"]] == ["RUNNING", "SUCCESS"]


def test_run_step_runs_only_what_was_asked_even_when_the_file_runs_everything(tmp_path):
    (tmp_path / "exp.py").write_text(EXPERIMENT)
    ran = marin("run", "exp.py", "--prefix", "out", "--step", "a", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "done: 1 succeeded" in ran.stderr
    assert f"b would write to {tmp_path}/out/b-" in ran.stdout  # the file's own code after run() still works
    assert [p.name.split("-")[0] for p in (tmp_path / "out").iterdir()] == ["a"]
    everything = marin("run", "exp.py", "--prefix", "out", cwd=tmp_path)
    assert "done: 1 cached, 1 succeeded" in everything.stderr


def test_verify_names_each_changed_missing_and_added_file(tmp_path):
    (tmp_path / "exp.py").write_text(EXPERIMENT)
    assert marin("run", "exp.py", "--prefix", "out", cwd=tmp_path).returncode == 0
    out = _output(tmp_path / "out", "a")
    artifact = json.loads((out / ".artifact.json").read_text())
    assert [(f["path"], f["size"], len(f["xxh3_128"])) for f in artifact["files"]] == [
        ("sub/count.txt", 1, 32),
        ("words.txt", 10, 32),
    ]

    clean = marin("verify", str(out), cwd=tmp_path)
    assert clean.returncode == 0, clean.stderr
    assert "ok: 2 files match the manifest" in clean.stderr

    (out / "words.txt").write_text("alpha betA")  # same size, other bytes
    (out / "sub" / "count.txt").unlink()
    (out / "stray.bin").write_bytes(b"\0")
    broken = marin("verify", str(out), cwd=tmp_path)
    assert broken.returncode == 1
    assert re.search(r"^changed words\.txt: xxh3_128 [0-9a-f]{16} -> [0-9a-f]{16}$", broken.stdout, re.M)
    assert "missing sub/count.txt" in broken.stdout and "added   stray.bin" in broken.stdout
    assert "1 changed, 1 missing, 1 added (of 2 recorded files)" in broken.stderr

    (out / "words.txt").write_text("alpha")
    assert "changed words.txt: size 10 -> 5" in marin("verify", str(out), cwd=tmp_path).stdout
    assert marin("verify", str(tmp_path), cwd=tmp_path).returncode == 2  # no step output there


def test_diff_shows_field_by_field_how_two_outputs_differ(tmp_path):
    (tmp_path / "exp.py").write_text(EXPERIMENT)
    assert marin("run", "exp.py", "--prefix", "out", cwd=tmp_path).returncode == 0
    (tmp_path / "exp.py").write_text(EXPERIMENT.replace('{"lang": "en"}', '{"lang": "fr", "extra": 1}'))
    assert marin("run", "exp.py", "--prefix", "out", cwd=tmp_path).returncode == 0

    def by_end_time(path):
        return json.loads((path / ".executor_info").read_text())["end_time"]

    a_en, a_fr = sorted((tmp_path / "out").glob("a-*"), key=by_end_time)
    b_en, b_fr = sorted((tmp_path / "out").glob("b-*"), key=by_end_time)

    shown = marin("diff", str(a_en), str(a_fr), cwd=tmp_path)
    assert shown.returncode == 1, shown.stderr
    lines = shown.stdout.splitlines()
    assert "hash_attrs hash_attrs.extra: (none) -> 1" in lines
    assert "hash_attrs hash_attrs.lang: en -> fr" in lines
    assert any(line.startswith("key        key: ") for line in lines)
    assert any(line.startswith("run        experiment.sha256: ") for line in lines)  # the file was edited

    deps = json.loads(marin("diff", str(b_en), str(b_fr), "--json", cwd=tmp_path).stdout)["sections"]
    assert [c["field"] for c in deps["deps"]] == ["deps.a"]
    assert deps["hash_attrs"] == [] and deps["code"] == []

    same = marin("diff", str(a_fr), str(a_fr), cwd=tmp_path)
    assert same.returncode == 0 and "no differences" in same.stdout

    # The same output as recorded by another environment (another orjson, another commit).
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(a_fr, elsewhere)
    info = json.loads((elsewhere / ".executor_info").read_text())
    orjson_version = info["environment"]["distributions"]["orjson"]
    info["environment"]["distributions"]["orjson"] = "0.1"
    info["git"]["commit"] = "f" * 40
    (elsewhere / ".executor_info").write_text(json.dumps(info))
    lines = marin("diff", str(a_fr), str(elsewhere), cwd=tmp_path).stdout.splitlines()
    assert f"versions   distributions.orjson: {orjson_version} -> 0.1" in lines
    assert any(
        line.startswith("git        git.commit: ") and line.endswith(" -> " + "f" * 40) for line in lines
    )


def _doc_block(doc: str, heading: str) -> list[str]:
    """The commands of the first ```bash block under `heading` in docs/`doc`."""
    text = (REPO / "docs" / doc).read_text()
    section = text[text.index(heading) :]
    block = section[section.index("```bash\n") + len("```bash\n") :]
    return [
        line for line in block[: block.index("```")].splitlines() if line.strip() and not line.startswith("#")
    ]


def test_the_documented_verify_and_diff_commands_run_verbatim(tmp_path):
    (tmp_path / "experiments" / "tutorials").mkdir(parents=True)
    shutil.copy(CUSTOM_STEP, tmp_path / "experiments" / "tutorials" / "custom_step.py")
    env = fresh_env()
    commands = _doc_block("execution.md", "## Checking an output: `verify` and `diff`")
    assert commands == [
        "marin run experiments/tutorials/custom_step.py --prefix marin-outputs",
        "marin verify marin-outputs/outputs/preprocess",
        "marin run experiments/tutorials/custom_step.py --prefix other-outputs",
        "marin diff marin-outputs/outputs/preprocess other-outputs/outputs/preprocess",
    ]
    for command in commands:
        done = subprocess.run(
            command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        # `marin diff` of two runs exits 1: they differ (in their command lines)
        assert done.returncode == (1 if command.startswith("marin diff ") else 0), (
            command,
            done.stdout,
            done.stderr,
        )


CODE_AND_INPUTS = textwrap.dedent("""
    from pathlib import Path
    from marin.execution.step_spec import StepSpec

    def count(path):
        words = sum(len(Path(f).read_text().split()) for f in sorted(Path("raw").glob("*.txt")))
        Path(path, "count.txt").write_text(str(words))

    counted = StepSpec(name="counted", fn=count, inputs=("raw/*.txt",))
""")


def test_diff_shows_the_code_and_inputs_sections(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "a.txt").write_text("one two")
    (raw / "b.txt").write_text("three")
    (tmp_path / "exp.py").write_text(CODE_AND_INPUTS)
    assert marin("run", "exp.py", "--prefix", "out", cwd=tmp_path).returncode == 0
    (raw / "b.txt").write_text("three four five")  # new bytes in a declared input
    (raw / "c.txt").write_text("six")  # and a new one
    # and an edit to the step's code
    (tmp_path / "exp.py").write_text(CODE_AND_INPUTS.replace("str(words)", "str(words) + '\\\\n'"))
    assert marin("run", "exp.py", "--prefix", "out", cwd=tmp_path).returncode == 0

    def by_end_time(path):
        return json.loads((path / ".executor_info").read_text())["end_time"]

    first, second = sorted((tmp_path / "out").glob("counted-*"), key=by_end_time)
    shown = marin("diff", str(first), str(second), cwd=tmp_path)
    assert shown.returncode == 1, shown.stderr
    lines = shown.stdout.splitlines()
    assert any(re.match(r"^code       code fingerprint: \S+ -> \S+$", line) for line in lines), lines
    assert any(line.startswith("inputs     inputs: raw/b.txt changed (size 5 -> 15)") for line in lines), (
        lines
    )
    assert any(line.startswith("inputs     inputs: raw/c.txt added") for line in lines), lines
    sections = json.loads(marin("diff", str(first), str(second), "--json", cwd=tmp_path).stdout)["sections"]
    assert sections["code"] and sections["inputs"] and sections["hash_attrs"] == []
