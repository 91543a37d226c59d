"""Marina in a real browser (Debian's chromium driven by Selenium) over a prefix a real pipeline made.

The pipeline is the product's own steps: tokenize -> train two tiny runs -> evaluate, plus a step that
keeps logging while the test watches its RUNNING page. The server is `marin ui` as a real process on
a free port. Each page's screenshot is saved under the test's tmp dir (and into
$MARIN_UI_SCREENSHOTS when set: that is how docs/ui-*.png are made).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from ports import free_port

from tests.marin.ui.prefix import chatter

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="needs Debian's chromium and chromium-driver (.ci/run installs them)",
)


@contextlib.contextmanager
def marin_ui(*args: str):
    """`marin ui ARGS --port N` as a real process on a free port; yields its base URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "marin.cli", "ui", *args, "--port", str(port)],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stderr.readline()
        assert f"http://127.0.0.1:{port}/" in line, line + (
            proc.stderr.read() if proc.poll() is not None else ""
        )
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def server(pipeline):
    """The UI over the pipeline's prefix."""
    with marin_ui(str(pipeline[1])) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        "--disable-gpu",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(10)  # lookups right after a navigation wait for the element to be parsed
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture()
def shots(tmp_path):
    """shoot(driver, name): save a screenshot under tmp_path (and $MARIN_UI_SCREENSHOTS when set)."""

    def shoot(driver, name: str) -> Path:
        path = tmp_path / f"ui-{name}.png"
        assert driver.save_screenshot(str(path)) and path.stat().st_size > 1000
        if os.environ.get("MARIN_UI_SCREENSHOTS"):
            shutil.copy(path, Path(os.environ["MARIN_UI_SCREENSHOTS"]) / path.name)
        return path

    return shoot


def _wait(predicate, timeout: float = 30.0, what: str = "condition"):
    from selenium.common.exceptions import StaleElementReferenceException

    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except StaleElementReferenceException:
            # htmx swaps a running step's log (outerHTML) every second; an element found just
            # before a swap goes stale, so look it up again on the next poll.
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


def _no_console_errors(driver) -> None:
    errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors


def _labels_apart(driver) -> None:
    """No two nodes of the drawn graph overlap, their labels included (each label is read whole)."""
    boxes = driver.execute_script(
        "return window.marinaCy.nodes().map(n => [n.data('label'), n.boundingBox({includeLabels: true})])"
    )
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1 :]:
            apart = (
                box_a["x2"] <= box_b["x1"]
                or box_b["x2"] <= box_a["x1"]
                or box_a["y2"] <= box_b["y1"]
                or box_b["y2"] <= box_a["y1"]
            )
            assert apart, (a, box_a, b, box_b)


def _rows(driver):
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, "table.outputs tr.row")


def test_outputs_filter_then_lineage_then_output(server, browser, shots):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    browser.get(server + "/")
    # tokenize, two trainings, an evaluation, a report
    _wait(lambda: len(_rows(browser)) == 5, what="the five outputs of the pipeline")
    shots(browser, "outputs")
    box = browser.find_element(By.ID, "filter-name")
    box.send_keys("nano")
    _wait(
        lambda: len(_rows(browser)) == 3, what="the filter to leave the two training runs and the evaluation"
    )
    assert "q=nano" in browser.current_url  # the filtered view has its own URL
    _no_console_errors(browser)

    row = next(r for r in _rows(browser) if "eval/nano" in r.text)
    row.find_element(By.CSS_SELECTOR, "a.lineage-link").click()
    _wait(lambda: "/lineage/" in browser.current_url, what="the lineage page")
    count = _wait(
        lambda: browser.execute_script("return window.marinaCy && window.marinaCy.nodes().length"),
        what="the graph to draw",
    )
    assert count == 3  # the evaluation, the run it scored, and the token cache both read
    _labels_apart(browser)
    shots(browser, "lineage")
    _no_console_errors(browser)

    # Click the tokenize node on the canvas itself, where Cytoscape drew it.
    x, y = browser.execute_script(
        "const n = window.marinaCy.nodes().filter(n => n.data('label') === 'tokenized/stories')[0];"
        "const p = n.renderedPosition(); return [p.x, p.y];"
    )
    graph = browser.find_element(By.ID, "graph")
    rect = graph.rect
    ActionChains(browser).move_to_element_with_offset(
        graph, int(x - rect["width"] / 2), int(y - rect["height"] / 2)
    ).click().perform()
    _wait(lambda: "/output/tokenized/" in browser.current_url, what="the click to open the tokenize output")
    assert "tokenized/stories" in browser.find_element(By.TAG_NAME, "h1").text
    shots(browser, "output")
    _no_console_errors(browser)


def test_running_step_log_updates_live(pipeline, server, browser, shots):
    from selenium.webdriver.common.by import By

    from marin.execution.step_runner import StepRunner
    from marin.execution.step_spec import StepSpec

    folder, prefix = pipeline
    stop = folder / "stop-chatter"
    step = StepSpec(name="chatter", fn=functools.partial(chatter, str(stop)))
    runner = threading.Thread(target=lambda: StepRunner(prefix=str(prefix), progress=False).run([step]))
    runner.start()
    try:
        browser.get(server + "/?state=RUNNING")
        _wait(
            lambda: (browser.refresh() or True) and len(_rows(browser)) == 1,
            what="the RUNNING step to appear",
        )
        _rows(browser)[0].find_element(By.CSS_SELECTOR, "a.name").click()
        first = _wait(
            lambda: "tick" in (text := browser.find_element(By.ID, "log").text) and text,
            what="the first log lines",
        )
        _wait(
            lambda: browser.find_element(By.ID, "log").text.count("tick") > first.count("tick") + 2,
            what="the log to grow without a reload",
        )
        assert _wait(lambda: browser.find_element(By.ID, "log").get_attribute("data-running")) == "yes"
        shots(browser, "running")
        _no_console_errors(browser)
    finally:
        stop.write_text("stop")
        runner.join(timeout=120)
    _wait(
        lambda: browser.find_element(By.ID, "log").get_attribute("data-running") == "no",
        what="the page to notice the step finished",
    )


def test_overlay_two_runs_draws_both_series(server, browser, shots):
    from selenium.webdriver.common.by import By

    browser.get(server + "/runs")
    boxes = browser.find_elements(By.CSS_SELECTOR, "input.pick-run")
    assert len(boxes) == 2 and len(browser.find_elements(By.CSS_SELECTOR, "input.pick-report")) == 1
    for box in boxes:
        box.click()
    browser.find_element(By.ID, "overlay").click()
    _wait(
        lambda: browser.execute_script("return !!(window.marinaCharts && window.marinaCharts.loss)"),
        what="the loss chart",
    )
    drawn = browser.execute_script(
        "const c = window.marinaCharts.loss;"
        "return c.data.datasets.map((d, i) => c.getDatasetMeta(i).data.length);"
    )
    assert drawn == [6, 6]
    painted = browser.execute_script(
        "const cv = document.getElementById('chart-loss'); const d = cv.getContext('2d')"
        ".getImageData(0, 0, cv.width, cv.height).data; let n = 0;"
        "for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++; return n;"
    )
    assert painted > 500
    assert "learning_rate" in browser.find_element(By.ID, "params").text
    shots(browser, "runs")
    _no_console_errors(browser)

    # The chart settings live in the URL: tokens on x, log y, smoothing.
    browser.get(browser.current_url + "&x=tokens&logy=1&smooth=0.6")
    _wait(
        lambda: browser.execute_script("return !!(window.marinaCharts && window.marinaCharts.loss)"),
        what="the loss chart with new settings",
    )
    scales, first, raw_x = browser.execute_script(
        "const c = window.marinaCharts.loss; const d = c.data.datasets[0].data;"
        "return [[c.options.scales.x.type, c.options.scales.y.type], d[1].y, d.map(p => p.x)];"
    )
    assert scales == ["linear", "logarithmic"]
    assert raw_x == [256 * step for step in range(1, 7)]  # batch 2 x seq_len 128 tokens a step
    raw = browser.execute_script(
        "return JSON.parse(document.getElementById('runs-data').textContent)[0].series.loss.map(p => p[2]);"
    )
    assert first == pytest.approx((0.6 * 0.4 * raw[0] + 0.4 * raw[1]) / (1 - 0.6**2))  # debiased EMA
    _no_console_errors(browser)


def test_token_cache_pages_show_decoded_text(server, browser, shots):
    from selenium.webdriver.common.by import By

    browser.get(server + "/?q=tokenized")
    _rows(browser)[0].find_element(By.CSS_SELECTOR, "a.name").click()
    browser.find_element(By.LINK_TEXT, "files").click()
    first = browser.find_element(By.CSS_SELECTOR, "pre.decoded").text
    assert len(first.split()) > 10
    browser.find_element(By.ID, "next-page").click()
    _wait(lambda: "start=20" in browser.current_url, what="the next page")
    second = browser.find_element(By.CSS_SELECTOR, "pre.decoded").text
    assert second != first and len(second.split()) > 10
    assert "document 20" in browser.find_element(By.CSS_SELECTOR, ".doc h3").text
    browser.find_element(By.ID, "show-ids").click()
    ids = browser.find_element(By.CSS_SELECTOR, "pre.ids").text.split()
    assert ids and all(token.isdigit() for token in ids)
    shots(browser, "data")
    _no_console_errors(browser)


def test_evaluations_page_shows_bpb(server, browser, shots):
    from selenium.webdriver.common.by import By

    browser.get(server + "/evals")
    row = browser.find_element(By.CSS_SELECTOR, "table.evals tbody tr")
    assert "eval/nano" in row.text and "tokenized/stories" in row.text
    row.find_element(By.TAG_NAME, "a").click()
    assert "Perplexity" in browser.page_source
    shots(browser, "evals")
    _no_console_errors(browser)


def test_experiment_plan_draws_every_step(ui_prefix, browser, shots):
    from selenium.webdriver.common.by import By

    prefix, experiment = ui_prefix
    with marin_ui(str(prefix), "--experiment", str(experiment)) as url:
        browser.get(url + "/experiment")
        rows = _wait(
            lambda: browser.find_elements(By.CSS_SELECTOR, "table.plan > tbody > tr"), what="the plan"
        )
        assert len(rows) == 5 and any("run: changed" in r.text and "hash_attrs.lr" in r.text for r in rows)
        drawn = _wait(
            lambda: browser.execute_script("return window.marinaCy && window.marinaCy.nodes().length"),
            what="the plan graph",
        )
        assert drawn == 5
        _labels_apart(browser)
        shots(browser, "experiment")
        _no_console_errors(browser)
