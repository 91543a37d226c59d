"""The `marin` command: run, plan, status and info on a real experiment file, as a real process."""

import json
import os
import subprocess
import sys
import textwrap

EXPERIMENT = textwrap.dedent("""
    from pathlib import Path
    from marin.execution.step_spec import StepSpec

    def make_text(path):
        Path(path, "text.txt").write_text("hello world")
        return {"words": 2}

    def shout(path):
        from marin.execution.context import current
        text = Path(current().path_of("text"), "text.txt").read_text()
        Path(path, "loud.txt").write_text(text.upper())

    def broken():
        raise ValueError("broken on purpose")

    text = StepSpec(name="text", fn=make_text, hash_attrs={"lang": "en"})
    loud = StepSpec(name="loud", fn=shout, deps=[text])
    _private = StepSpec(name="never-run", fn=broken)
    if __name__ == "__main__":
        raise SystemExit("marin imports this file as a module, so this never runs")
""")


def marin(*args, cwd, **env_vars):
    env = {**os.environ, "MARIN_PREFIX": "", **env_vars}
    return subprocess.run(
        [sys.executable, "-m", "marin.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_run_plan_status_info_round_trip(tmp_path):
    (tmp_path / "exp.py").write_text(EXPERIMENT)
    prefix = str(tmp_path / "out")

    planned = marin("plan", "exp.py", "--prefix", prefix, "--json", cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr
    plan = json.loads(planned.stdout)
    assert [(s["name"], s["state"]) for s in plan["steps"]] == [("text", "run: new"), ("loud", "run: new")]

    ran = marin("run", "exp.py", "--prefix", prefix, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "done: 2 succeeded" in ran.stderr
    again = marin("run", "exp.py", "--prefix", prefix, cwd=tmp_path)
    assert "done: 2 cached" in again.stderr

    status = marin("status", prefix, "--json", cwd=tmp_path)
    rows = json.loads(status.stdout)
    assert sorted((r["name"], r["state"]) for r in rows) == [("loud", "SUCCESS"), ("text", "SUCCESS")]

    text_path = next(r["path"] for r in rows if r["name"] == "text")
    info = marin("info", text_path, cwd=tmp_path)
    assert info.returncode == 0, info.stderr
    for expected in (
        "step     text",
        "state    SUCCESS",
        'params   {"lang":"en"}',
        "make_text",
        'result   {"words":2}',
        "text.txt  11 B",
    ):
        assert expected in info.stdout
    table = marin("status", prefix, cwd=tmp_path)
    assert "SUCCESS" in table.stdout and "loud" in table.stdout

    # A step's name stands for its latest output under the prefix.
    by_name = marin("info", "text", "--prefix", prefix, cwd=tmp_path)
    assert by_name.returncode == 0 and f"output   {text_path}" in by_name.stdout, by_name.stderr
    verified = marin("verify", "loud", cwd=tmp_path, MARIN_PREFIX=prefix)
    assert verified.returncode == 0 and "ok: 1 files match the manifest" in verified.stderr, verified.stderr
    nowhere = marin("status", "nowhere", cwd=tmp_path)  # a missing prefix is a mistake, not 0 outputs
    assert nowhere.returncode == 2 and nowhere.stderr.startswith(f"error: {tmp_path}/nowhere: no such folder")
    typo = marin("info", "txt", "--prefix", prefix, cwd=tmp_path)
    assert typo.returncode == 2 and typo.stderr.startswith("error: txt is neither an output folder nor")
    assert "did you mean text?" in typo.stderr


def test_step_option_picks_one_step_and_its_dependencies(tmp_path):
    (tmp_path / "exp.py").write_text(EXPERIMENT)
    ran = marin("run", "exp.py", "--prefix", "out", "--step", "text", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert [p.name.split("-")[0] for p in (tmp_path / "out").iterdir()] == ["text"]
    unknown = marin("run", "exp.py", "--prefix", "out", "--step", "nope", cwd=tmp_path)
    assert unknown.returncode == 2 and "declares no step named ['nope']" in unknown.stderr


def test_failed_run_exits_nonzero_with_traceback_and_log_location(tmp_path):
    (tmp_path / "exp.py").write_text(EXPERIMENT + "broken_step = StepSpec(name='broken', fn=broken)\n")
    ran = marin("run", "exp.py", "--prefix", "out", cwd=tmp_path)
    assert ran.returncode == 1
    assert "ValueError: broken on purpose" in ran.stderr and "/.executor_log" in ran.stderr
    assert (
        len(list((tmp_path / "out").glob("text-*/.artifact.json"))) == 1
    )  # independent steps still finished
    info_missing = marin("info", str(tmp_path), cwd=tmp_path)
    assert info_missing.returncode == 2 and "holds no step output" in info_missing.stderr


def test_a_zephyr_declaration_error_is_reported_without_a_traceback(tmp_path):
    (tmp_path / "exp.py").write_text(
        textwrap.dedent("""
        from marin.data.zephyr_step import zephyr_step
        from zephyr import Dataset

        def build(context):
            return Dataset.from_list([{"text": "a"}])

        table = zephyr_step("table", build, format="csv")
        """)
    )
    for command in ("plan", "run"):
        ran = marin(command, "exp.py", "--prefix", "out", cwd=tmp_path)
        assert ran.returncode == 2, ran.stderr
        assert "error: exp.py:8: unknown output format 'csv'" in ran.stderr and "Traceback" not in ran.stderr


HEADLINE_EXPERIMENT = textwrap.dedent("""
    from marin.execution.step_spec import StepSpec

    def score():
        return {"headline": {"metric": "bpb", "value": 1.23456}, "other": 1}

    def count():
        return {"headline": {"metric": "tokens", "value": 123456, "n": 1000}}

    def score_with_interval():
        return {"headline": {"metric": "bpb", "value": 1.23456, "ci95": [1.2012, 1.2698], "n": 50}}

    scored = StepSpec(name="evaluations/scored", fn=score)
    counted = StepSpec(name="tokenized/counted", fn=count)
    bounded = StepSpec(name="evaluations/bounded", fn=score_with_interval)
""")


def test_status_and_info_show_a_steps_headline_metric(tmp_path):
    (tmp_path / "exp.py").write_text(HEADLINE_EXPERIMENT)
    prefix = str(tmp_path / "out")
    assert marin("run", "exp.py", "--prefix", prefix, cwd=tmp_path).returncode == 0

    rows = json.loads(marin("status", prefix, "--json", cwd=tmp_path).stdout)
    assert [(r["name"], r["headline"]) for r in rows] == [
        ("evaluations/bounded", "bpb = 1.235 (95% CI 1.201-1.27, n=50)"),  # the interval and n shown with it
        ("evaluations/scored", "bpb = 1.235"),
        ("tokenized/counted", "tokens = 123,456 (n=1,000)"),
    ]
    assert "bpb = 1.235" in marin("status", prefix, cwd=tmp_path).stdout
    info = marin("info", "evaluations/scored", "--prefix", prefix, cwd=tmp_path)
    assert "headline bpb = 1.235" in info.stdout


REVISED = textwrap.dedent("""
    import os
    from pathlib import Path
    from marin.execution.step_spec import StepSpec

    def write(path):
        Path(path, "v.txt").write_text(os.environ["V"])

    fixed = StepSpec(name="fixed", fn=write, hash_attrs={"v": os.environ["V"]}, output_path="fixed")
""")


def test_superseded_copies_are_hidden_from_status_and_removed_only_by_gc_yes(tmp_path):
    (tmp_path / "exp.py").write_text(REVISED)
    prefix = tmp_path / "out"
    for version in ("1", "2"):  # same output path, new key: the first output is moved aside, not deleted
        ran = marin("run", "exp.py", "--prefix", str(prefix), cwd=tmp_path, V=version)
        assert ran.returncode == 0, ran.stderr
    superseded = [p for p in prefix.iterdir() if ".superseded-" in p.name]
    assert len(superseded) == 1 and (superseded[0] / "v.txt").read_text() == "1"

    rows = json.loads(marin("status", str(prefix), "--json", cwd=tmp_path).stdout)
    assert [(r["name"], r["path"].endswith("/fixed")) for r in rows] == [("fixed", True)]
    every = json.loads(marin("status", str(prefix), "--all", "--json", cwd=tmp_path).stdout)
    assert sorted(r["superseded"] for r in every) == [False, True]

    dry = marin("gc", str(prefix), cwd=tmp_path)  # lists only, by default
    assert dry.returncode == 0, dry.stderr
    assert f"would delete {superseded[0]}" in dry.stdout and superseded[0].exists()
    assert "pass --yes" in dry.stdout

    collected = marin("gc", str(prefix), "--yes", cwd=tmp_path)
    assert collected.returncode == 0, collected.stderr
    assert f"deleted {superseded[0]}" in collected.stdout
    assert not superseded[0].exists()
    assert (prefix / "fixed" / "v.txt").read_text() == "2"
    assert len(json.loads(marin("status", str(prefix), "--all", "--json", cwd=tmp_path).stdout)) == 1
