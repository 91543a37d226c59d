"""The curation helpers declare the raw files they read (appending to one reruns the step, naming
the file in the plan) and take adopt=True, through a real StepRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from marin.execution.lazy import lower
from marin.execution.step_runner import StepRunner
from marin.experiment.curation import (
    decontaminate,
    dedup_exact,
    dedup_fuzzy,
    extract_text,
    filter_language,
    filter_quality,
    mix,
)
from zephyr import ZephyrConfig

SYNC = ZephyrConfig(backend="sync", quiet=True)
ARTICLE = "The baker painted the old bridge near the harbor with great care, and the town came to see it."


def append_docs(path: Path, start: int, n: int, field: str = "text") -> None:
    with path.open("a") as f:
        for i in range(start, start + n):
            f.write(json.dumps({"id": i, field: f"{ARTICLE} Page {i} tells of day {i}."}) + "\n")


HELPERS = {
    "extract_text": lambda src, other, **kw: extract_text("c/x", src, html_key="text", zephyr=SYNC, **kw),
    "filter_language": lambda src, other, **kw: filter_language("c/x", src, zephyr=SYNC, **kw),
    "filter_quality": lambda src, other, **kw: filter_quality("c/x", src, rules=["c4"], zephyr=SYNC, **kw),
    "dedup_exact": lambda src, other, **kw: dedup_exact("c/x", src, zephyr=SYNC, **kw),
    "dedup_fuzzy": lambda src, other, **kw: dedup_fuzzy("c/x", src, zephyr=SYNC, **kw),
    "decontaminate": lambda src, other, **kw: decontaminate("c/x", other, against=[src], zephyr=SYNC, **kw),
    "mix": lambda src, other, **kw: mix("c/x", {src: 1.0, other: 1.0}, total_documents=4, zephyr=SYNC, **kw),
}


@pytest.mark.parametrize("helper", sorted(HELPERS))
def test_appending_to_a_raw_input_reruns_the_step_naming_the_file(tmp_path, helper):
    data = tmp_path / "data"
    data.mkdir()
    src, other = data / "raw.jsonl", data / "other.jsonl"
    append_docs(src, 0, 5)
    append_docs(other, 100, 5)
    spec = lower(HELPERS[helper](str(src), str(other)))
    assert str(src) in spec.inputs and not any(p.startswith(("marin://", "step:")) for p in spec.inputs)
    runner = StepRunner(prefix=str(tmp_path / "prefix"), progress=False)
    runner.run([spec])
    assert runner.plan([spec]).of(spec).state == "cached"
    before = src.stat().st_size
    append_docs(src, 5, 2)
    planned = runner.plan([spec]).of(spec)
    assert planned.state == "run: changed"
    assert f"inputs: data/raw.jsonl changed (size {before} -> {src.stat().st_size})" in [
        str(c) for c in planned.changes
    ]


def test_embedded_corpora_and_step_inputs_are_not_declared_as_files(tmp_path):
    text = extract_text("c/text", "marin://web-synth?pages=20", zephyr=SYNC)
    assert lower(text).inputs == ()
    assert lower(dedup_exact("c/d", text)).inputs == ()


@pytest.mark.parametrize("helper", sorted(HELPERS))
def test_adopt_takes_an_existing_folder_as_the_output_without_running(tmp_path, helper):
    src, other = tmp_path / "raw.jsonl", tmp_path / "other.jsonl"
    append_docs(src, 0, 3)
    append_docs(other, 100, 3)
    adopted = lower(HELPERS[helper](str(src), str(other), adopt=True))
    assert adopted.adopt is True and lower(HELPERS[helper](str(src), str(other))).adopt is False
    runner = StepRunner(prefix=str(tmp_path / "prefix"), progress=False)
    out = Path(runner.plan([adopted]).of(adopted).output_path)
    out.mkdir(parents=True)
    (out / "part-00000-of-00001.jsonl").write_text('{"id": "mine", "text": "made elsewhere"}\n')
    runner.run([adopted])
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "part-00000-of-00001.jsonl"
    ]
    assert json.loads((out / ".executor_info").read_text())["adopted"] is True
