"""`marin gc` decides from records, never from names: moved-aside copies and older versions nothing
kept depends on go; the latest output of each step, what it depends on, and anything unreadable stay."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from fray.cluster import ThreadCluster
from marin.execution.gc import collect
from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec
from tests.shell_env import fresh_env

DOCS = Path(__file__).resolve().parents[3] / "docs" / "execution.md"


def _run(prefix, *steps):
    return StepRunner(prefix=str(prefix), cluster=ThreadCluster(), progress=False).run(list(steps))


def _writer(text):
    def fn(path):
        Path(path, "data.txt").write_text(text)

    return fn


def _chain(a_value):
    a = StepSpec(name="a", fn=_writer(f"a={a_value}" * 100), hash_attrs={"v": a_value})
    b = StepSpec(name="b", fn=_writer("b"), deps=[a])
    return a, b


def _marin(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "marin.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MARIN_PREFIX": ""},
    )


def test_a_live_output_named_like_a_superseded_copy_survives_gc(tmp_path):
    prefix = tmp_path / "prefix"
    release = StepSpec(
        name="release", fn=_writer("v1 weights"), output_path="models/release.superseded-by-v2-2024"
    )
    _run(prefix, release)
    fake = prefix / "models" / "old.superseded-abcdef12-1700000000"  # made by hand, no record of being moved
    fake.mkdir()
    (fake / "notes.txt").write_text("mine")

    ran = _marin("gc", str(prefix), "--yes", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "deleted 0 folder(s)" in ran.stdout
    assert (prefix / "models" / "release.superseded-by-v2-2024" / "data.txt").read_text() == "v1 weights"
    assert (fake / "notes.txt").read_text() == "mine"


def test_gc_deletes_moved_aside_copies_only_with_yes_and_prints_the_bytes(tmp_path):
    prefix = tmp_path / "prefix"
    for value in ("1", "2"):  # a new key at a fixed path: the first output is moved aside
        _run(
            prefix,
            StepSpec(name="fixed", fn=_writer(value * 1000), hash_attrs={"v": value}, output_path="fixed"),
        )
    aside = [p for p in prefix.iterdir() if p != prefix / "fixed"]
    assert len(aside) == 1 and (aside[0] / "data.txt").read_text() == "1" * 1000
    record = json.loads((aside[0] / ".marin_aside").read_text())
    assert record["kind"] == "superseded" and record["from"] == str(prefix / "fixed")
    size = sum(f.stat().st_size for f in aside[0].rglob("*") if f.is_file())

    listed = _marin("gc", str(prefix), cwd=tmp_path)
    assert f"would delete {aside[0]}" in listed.stdout and f"would reclaim {size} bytes" in listed.stdout
    assert aside[0].exists()
    deleted = _marin("gc", str(prefix), "--yes", cwd=tmp_path)
    assert f"deleted {aside[0]}" in deleted.stdout and f"reclaimed {size} bytes" in deleted.stdout
    assert not aside[0].exists()
    assert (prefix / "fixed" / "data.txt").read_text() == "2" * 1000


def test_an_older_version_stays_while_the_latest_output_of_another_step_depends_on_it(tmp_path):
    prefix = tmp_path / "prefix"
    a1, b1 = _chain("1")
    _run(prefix, b1)
    a2, _ = _chain("2")
    _run(prefix, a2)  # a has a newer version now, but the latest b still reads the old one
    old_a = {p.name for p in prefix.iterdir() if p.name.startswith("a-")}
    assert len(old_a) == 2

    report = collect(str(prefix), delete=True)
    assert report.garbage == []
    assert {p.name for p in prefix.iterdir() if p.name.startswith("a-")} == old_a
    assert any("a kept output depends on it" in why for _, why in report.kept)

    _, b2 = _chain("2")
    _run(prefix, b2)  # now the latest b reads the latest a: the old a and the old b are garbage
    kept_latest = collect(str(prefix), keep_latest=2)
    assert kept_latest.garbage == []
    report = collect(str(prefix), delete=True)
    assert sorted(Path(g.path).name[:2] for g in report.garbage) == ["a-", "b-"]
    assert report.bytes == sum(g.size for g in report.garbage) > 0
    remaining = sorted(p.name[:2] for p in prefix.iterdir())
    assert remaining == ["a-", "b-"]
    assert (Path(_run(prefix, b2).output_path(b2)) / "data.txt").read_text() == "b"  # still cached


def test_gc_never_deletes_an_output_whose_status_it_cannot_read(tmp_path):
    prefix = tmp_path / "prefix"
    a1, _ = _chain("1")
    _run(prefix, a1)
    a2, _ = _chain("2")
    _run(prefix, a2)
    old = next(p for p in prefix.iterdir() if (p / "data.txt").read_text().startswith("a=1"))
    (old / ".executor_status").write_bytes(b"garbled{")
    report = collect(str(prefix), delete=True)
    assert report.garbage == []
    assert (old,) == tuple(Path(p) for p, why in report.kept if "unreadable status" in why)
    assert (old / "data.txt").exists()


def _documented_gc_commands() -> list[str]:
    text = DOCS.read_text()
    section = text[text.index("## What marin will and will not delete") :]
    section = section[: section.index("\n## ", 1)]
    return re.findall(r"^(marin gc [^\n]+)$", section, flags=re.M)


def test_the_gc_commands_in_the_docs_run_verbatim(tmp_path):
    commands = _documented_gc_commands()
    assert commands == [
        "marin gc marin-outputs",
        "marin gc marin-outputs --keep-latest 2",
        "marin gc marin-outputs --yes",
    ]
    prefix = tmp_path / "marin-outputs"
    a1, b1 = _chain("1")
    _run(prefix, b1)
    a2, b2 = _chain("2")
    _run(prefix, b2)
    for command in commands:
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=tmp_path,
            env=fresh_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, (command, done.stderr)
        assert "bytes" in done.stdout
    assert sorted(p.name[:2] for p in prefix.iterdir()) == [
        "a-",
        "b-",
    ]  # the `--yes` command deleted the old pair
