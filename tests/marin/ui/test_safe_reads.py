"""The UI reads records and data files safely: a FIFO never hangs a page, a symlink never serves bytes
from outside the prefix, a huge line is skimmed, not loaded, and no page asks a CDN for anything."""

from __future__ import annotations

import os
import re
import threading
import tracemalloc
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from fray.cluster import ThreadCluster
from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec
from marin.ui.app import UiConfig, create_app
from marin.ui.data import LINE_CAP, page_file
from marin.ui.site import HERE

pytestmark = pytest.mark.timeout(120)  # a FIFO read that blocked would hang here, not pass

SECRET = "outside-the-prefix-secret-bytes"


def _one_output(tmp_path: Path) -> tuple[Path, Path]:
    """(prefix, the output folder) of one real step run."""
    prefix = tmp_path / "out"
    result = StepRunner(prefix=str(prefix), cluster=ThreadCluster(), progress=False).run(
        [StepSpec(name="fine", fn=dict)]
    )
    (out,) = result.results
    return prefix, Path(out)


def _get(client: TestClient, url: str):
    """GET in a thread, so that a read that blocks fails the test instead of hanging it."""
    box: dict = {}
    worker = threading.Thread(target=lambda: box.update(response=client.get(url)), daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), f"GET {url} hung"
    return box["response"]


@pytest.mark.parametrize("record", [".executor_info", ".artifact.json", ".executor_log"])
def test_a_fifo_record_renders_as_unreadable_and_never_hangs(tmp_path, record):
    prefix, out = _one_output(tmp_path)
    (out / record).unlink(missing_ok=True)
    os.mkfifo(out / record)  # nobody ever writes to it: a plain open() would block forever
    with TestClient(create_app(UiConfig(str(prefix)))) as client:
        page = _get(client, f"/output/{out.name}")
        assert page.status_code == 200
        assert re.search(
            rf"<code>{re.escape(record)}</code>: unreadable, it is a FIFO, not a regular file", page.text
        )
        assert _get(client, "/").status_code == 200
        assert _get(client, f"/lineage/{out.name}").status_code == 200


@pytest.mark.parametrize("record", [".executor_info", ".artifact.json", ".executor_log"])
def test_a_record_symlinked_out_of_the_prefix_renders_as_unreadable_without_its_bytes(tmp_path, record):
    prefix, out = _one_output(tmp_path)
    outside = tmp_path / "outside.json"
    original = (out / record).read_bytes() if (out / record).exists() else b""
    outside.write_bytes(original.replace(b'"fine"', f'"{SECRET}"'.encode()) if original else SECRET.encode())
    (out / record).unlink(missing_ok=True)
    (out / record).symlink_to(outside)
    with TestClient(create_app(UiConfig(str(prefix)))) as client:
        page = _get(client, f"/output/{out.name}")
        assert page.status_code == 200
        assert f"<code>{record}</code>: unreadable, it is a symlink" in page.text
        assert SECRET not in page.text
        assert SECRET not in _get(client, "/").text
        assert SECRET not in _get(client, f"/log/{out.name}").text


def test_a_fifo_data_file_is_refused_with_its_reason_not_read(tmp_path):
    prefix, out = _one_output(tmp_path)
    os.mkfifo(out / "rows.jsonl")
    with TestClient(create_app(UiConfig(str(prefix)))) as client:
        page = _get(client, f"/data/{out.name}/rows.jsonl")
        assert page.status_code == 404
        assert "is unreadable: it is a FIFO, not a regular file" in page.text


def test_a_line_longer_than_the_cap_is_skimmed_not_loaded(tmp_path):
    huge = 32 << 20  # one 32 MiB line with no newline, then two short lines
    path = tmp_path / "one-line.txt"
    with open(path, "w") as f:
        f.write("x" * huge + "\nsecond\nthird")
    tracemalloc.start()
    try:
        page = page_file(str(path), 0, 2)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert page.records == ["x" * LINE_CAP + f" ... ({huge - LINE_CAP} more characters)", "second"]
    assert page.has_more
    assert peak < 4 << 20  # a few chunks of the line at a time, never the whole 32 MiB
    assert page_file(str(path), 1, 5).records == ["second", "third"]  # paging past it skims it too


def test_a_line_exactly_at_the_cap_is_shown_whole(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text("y" * LINE_CAP + "\n" + "z" * (LINE_CAP + 1) + "\n")
    assert page_file(str(path), 0, 5).records == ["y" * LINE_CAP, "z" * LINE_CAP + " ... (1 more characters)"]


def test_no_template_script_or_stylesheet_loads_anything_from_the_network():
    files = [
        *sorted((HERE / "templates").glob("*.html")),
        HERE / "static" / "ui.js",
        HERE / "static" / "ui.css",
    ]
    assert len(files) > 3
    for f in files:
        found = re.findall(r"https?://[^\s\"'<>)]+", f.read_text())
        assert found == [], f"{f.name} names {found}: the UI must work offline (vendor the asset instead)"


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_a_metrics_file_that_is_not_a_regular_file_is_named_unreadable_on_the_runs_page(tmp_path, kind):
    prefix, out = _one_output(tmp_path)
    if kind == "fifo":
        os.mkfifo(out / "metrics.jsonl")  # a plain open() of it would block the page forever
    else:
        outside = tmp_path / "outside.jsonl"
        outside.write_text(f'{{"step": 1, "loss": 4242.5, "note": "{SECRET}"}}\n')
        (out / "metrics.jsonl").symlink_to(outside)
    with TestClient(create_app(UiConfig(str(prefix)))) as client:
        page = _get(client, f"/runs?o={out.name}")
        assert page.status_code == 200
        assert "metrics.jsonl is unreadable: it is a" in page.text
        assert "4242.5" not in page.text and SECRET not in page.text
