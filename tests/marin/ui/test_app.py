"""Every route of the UI app, through Starlette's TestClient, over a prefix a real run produced."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from urllib.parse import quote

import pytest
from markupsafe import escape
from starlette.testclient import TestClient

from marin.ui.app import UiConfig, create_app


@pytest.fixture(scope="module")
def client(ui_prefix):
    prefix, experiment = ui_prefix
    with TestClient(create_app(UiConfig(str(prefix), experiment=str(experiment)))) as c:
        yield c


def _rel(client, name: str, state: str = "SUCCESS") -> str:
    html = client.get("/", params={"q": name, "state": state}).text
    found = re.findall(r'href="/output/([^"]+)"', html)
    assert found, f"no {state} output named {name}"
    return found[0]


def test_outputs_page_lists_every_state_and_filters_by_name_and_state(client):
    page = client.get("/")
    assert page.status_code == 200
    for state in ("SUCCESS", "FAILED", "superseded"):
        assert f'data-state="{state}"' in page.text
    assert "final_loss = " in page.text and "tokens = " in page.text  # headlines of train and token cache
    failed = client.get("/", params={"state": "FAILED"}).text
    assert failed.count('class="row"') == 1 and "broken" in failed
    named = client.get("/", params={"q": "train"}).text
    assert named.count('class="row"') == 2  # the two versions of train
    by_age = client.get("/", params={"sort": "age", "desc": "1"})
    assert by_age.status_code == 200 and by_age.text.count('class="row"') == page.text.count('class="row"')


def test_output_page_shows_records_log_events_and_other_versions(client):
    rel = _rel(client, "train")
    page = client.get(f"/output/{rel}")
    assert page.status_code == 200
    for shown in (
        "hash_attrs",
        "&#34;lr&#34;",
        "Inputs",
        "Events",
        "Artifact",
        "metrics.jsonl",
        "Other versions of train",
        "diff with this one",
    ):
        assert shown in page.text, shown
    raw = _rel(client, "raw")
    assert "raw wrote" in client.get(f"/output/{raw}").text  # the log tail
    log = client.get(f"/log/{raw}")
    assert log.status_code == 200 and 'data-running="no"' in log.text and "hx-trigger" not in log.text


def test_a_failed_outputs_events_show_its_error_line_and_its_results_read_rounded(client):
    failed = client.get(f"/output/{_rel(client, 'broken', 'FAILED')}").text
    events = re.search(r'<table class="events">.*?</table>', failed, re.S).group(0)
    summary = re.search(r"<summary>(.*?)</summary>", events, re.S).group(1)
    assert summary == "ValueError: broken on purpose &lt;b&gt;not bold&lt;/b&gt;"  # not the log's first line
    train = client.get(f"/output/{_rel(client, 'train')}").text
    artifact = html.unescape(re.search(r"<h2>Artifact</h2>.*?</pre>", train, re.S).group(0))
    final = re.search(r'"final_loss": ([0-9.e-]+)', artifact).group(1)
    assert len(final.replace("0.", "").lstrip("0")) <= 5, final  # 4 significant digits, not a float's 17


def test_diff_page_names_the_changed_hyperparameter(client):
    page = client.get(f"/output/{_rel(client, 'train')}").text
    link = re.search(r'href="(/diff\?[^"]+)"', page).group(1).replace("&amp;", "&")
    diff = client.get(link)
    assert diff.status_code == 200 and "hash_attrs.lr" in diff.text


def test_lineage_has_upstream_and_downstream_nodes(client):
    page = client.get(f"/lineage/{_rel(client, 'train')}")
    assert page.status_code == 200
    data = json.loads(
        re.search(r'<script type="application/json" id="graph-data">(.*?)</script>', page.text, re.S).group(1)
    )
    labels = {n["label"] for n in data["nodes"]}
    assert {"raw", "train"} <= labels and any(label.startswith("evil") for label in labels)
    assert len(data["edges"]) >= 2 and all(n["url"].startswith("/output/") for n in data["nodes"])


def test_experiment_page_shows_the_plan_with_states_and_changes(client):
    page = client.get("/experiment")
    assert page.status_code == 200
    assert "cached" in page.text and "blocked" in page.text  # broken failed before
    # pinned's output was last made with lr 0.01; the file declares 0.005 (the test's env var is unset)
    assert "run: changed" in page.text and "hash_attrs.lr" in page.text


def test_experiment_page_is_404_without_an_experiment(ui_prefix):
    with TestClient(create_app(UiConfig(str(ui_prefix[0])))) as c:
        assert c.get("/experiment").status_code == 404


def test_runs_page_overlays_selected_runs_and_diffs_their_hyperparameters(client):
    runs = client.get("/runs").text
    rels = re.findall(r'class="pick-run" name="o" value="([^"]+)"', runs)
    assert len(rels) == 2
    page = client.get("/runs", params=[("o", rels[0]), ("o", rels[1]), ("x", "tokens"), ("logy", "1")])
    assert page.status_code == 200
    payload = json.loads(re.search(r'id="runs-data">(.*?)</script>', page.text, re.S).group(1))
    assert [len(run["series"]["loss"]) for run in payload] == [10, 10]
    assert len(payload[0]["series"]["eval_bpb"]) == 2
    table = re.search(r'<table class="params".*?</table>', page.text, re.S).group(0)
    assert ">lr<" in table and ">batch<" not in table  # only what differs
    assert ">batch<" in client.get("/runs", params=[("o", rels[0]), ("o", rels[1]), ("all", "1")]).text


@pytest.mark.parametrize("shard", ["a.jsonl", "b.jsonl.gz", "c.jsonl.zst", "d.parquet"])
def test_data_page_pages_through_every_shard_format(client, shard):
    raw = _rel(client, "raw")
    first = client.get(f"/data/{raw}/data/{shard}", params={"size": 20})
    assert first.status_code == 200 and "&#34;row 19&#34;" in first.text and "row 20" not in first.text
    assert 'id="next-page"' in first.text
    last = client.get(f"/data/{raw}/data/{shard}", params={"start": 40, "size": 20})
    assert "&#34;row 44&#34;" in last.text and 'id="next-page"' not in last.text


def test_data_page_lists_folders_and_pages_text_files(client):
    raw = _rel(client, "raw")
    listing = client.get(f"/data/{raw}")
    assert listing.status_code == 200 and f'href="/data/{raw}/data"' in listing.text
    text = client.get(f"/data/{raw}/data/e.txt", params={"start": 25})
    assert "line 29" in text.text and "line 24" not in text.text
    assert client.get("/data").status_code == 200


def test_token_cache_page_decodes_documents_and_shows_ids_on_demand(client):
    rel = _rel(client, "tokenized/stories")
    page = client.get(f"/data/{rel}", params={"size": 3})
    assert page.status_code == 200 and "document 2" in page.text and 'class="ids"' not in page.text
    from marin.data.corpus import stories

    first_words = next(iter(stories(0, 1))).split()[0]
    assert first_words in page.text or "document 0" in page.text
    with_ids = client.get(f"/data/{rel}", params={"size": 3, "ids": "1"})
    assert 'class="ids"' in with_ids.text
    validation = client.get(f"/data/{rel}", params={"split": "validation"})
    assert validation.status_code == 200
    assert client.get(f"/data/{rel}", params={"split": "nope"}).status_code == 404


def test_evaluations_page_lists_outputs_with_results(client):
    page = client.get("/evals")
    assert page.status_code == 200 and "no evaluation outputs" in page.text
    assert client.get(f"/evals/{_rel(client, 'raw')}").status_code == 404


@pytest.fixture(scope="module")
def pipeline_client(pipeline):
    with TestClient(create_app(UiConfig(str(pipeline[1])))) as c:
        yield c


def test_evaluation_pages_show_bpb_per_dataset_and_samples(pipeline_client, pipeline):
    results = json.loads(next((pipeline[1] / "eval").glob("nano-*/results.json")).read_text())
    table = pipeline_client.get("/evals").text
    from marin.evaluation.compare_render import interval

    bpb = results["perplexity"]["micro"]["bpb"]
    assert "eval/nano" in table and interval(bpb) in table  # rounded, with its interval and n
    assert f"{bpb['value']!r}" not in table  # no unrounded floats
    rel = _rel(pipeline_client, "eval/nano")
    page = pipeline_client.get(f"/evals/{rel}")
    assert page.status_code == 200 and "tokenized/stories" in page.text and "Once upon a time" in page.text
    assert interval(bpb) in page.text and f"{bpb['value']!r}" not in page.text
    samples = pipeline_client.get(f"/data/{rel}/samples.jsonl")
    assert samples.status_code == 200 and "Once upon a time" in samples.text


def test_evaluation_page_shows_the_harness_per_sample_outputs(pipeline_client, pipeline):
    out = next((pipeline[1] / "eval").glob("nano-*/results.json")).parent
    results = json.loads((out / "results.json").read_text())
    assert results["harness_samples"] == {
        "marin_story_endings": "harness_samples/marin_story_endings.jsonl",
        "marin_text_perplexity": "harness_samples/marin_text_perplexity.jsonl",
    }
    endings = [json.loads(line) for line in (out / "harness_samples" / "marin_story_endings.jsonl").open()]
    assert [r["doc_id"] for r in endings] == [0, 1, 2, 3]  # harness_items=4
    first = endings[0]
    assert first["doc"]["choices"][first["target"]] in first["arguments"][first["target"]][1]
    assert set(first["metrics"]) == {"acc", "acc_norm"} and len(first["response"]) == len(
        first["doc"]["choices"]
    )

    rel = _rel(pipeline_client, "eval/nano")
    page = pipeline_client.get(f"/evals/{rel}").text
    section = page[page.index("Harness samples") :]
    for task in ("marin_story_endings", "marin_text_perplexity"):
        assert f'href="/data/{rel}/harness_samples/{task}.jsonl"' in section
    assert str(escape(first["doc"]["choices"][1])) in section and "acc_norm" in section
    browse = pipeline_client.get(f"/data/{rel}/harness_samples/marin_text_perplexity.jsonl")
    assert browse.status_code == 200 and "bits_per_byte" in browse.text


def test_a_sweep_report_selects_the_runs_it_compares(pipeline_client):
    report = _rel(pipeline_client, "reports/lr")
    assert f'href="/runs?o={report}"' in pipeline_client.get(f"/output/{report}").text
    page = pipeline_client.get("/runs", params={"o": report})
    payload = json.loads(re.search(r'id="runs-data">(.*?)</script>', page.text, re.S).group(1))
    assert len(payload) == 2 and all(len(run["series"]["eval_bpb"]) == 2 for run in payload)
    assert "learning_rate" in re.search(r'<table class="params".*?</table>', page.text, re.S).group(0)


def test_static_assets_are_served_from_the_package(client):
    for asset in (
        "htmx.min.js",
        "chart.umd.min.js",
        "cytoscape.min.js",
        "dagre.min.js",
        "cytoscape-dagre.js",
        "LICENSES",
    ):
        assert client.get(f"/static/vendor/{asset}").status_code == 200


@pytest.mark.parametrize(
    "attempt",
    [
        "/output/../../etc/passwd",
        "/output/..%2F..%2Fetc%2Fpasswd",
        "/data/..%2f..%2fetc",
        "/data/%2e%2e/%2e%2e/etc",
        "/data/raw%252F..%252F..",
        "/output/..\\..\\etc",
        "/data/raw/..%2F..%2F..",
        "/lineage/%2e%2e",
        "/log/../x",
        "/data/outside-link/passwd",
        "/output/nope",
    ],
)
def test_paths_outside_the_prefix_are_404(client, attempt):
    response = client.get(attempt)
    assert response.status_code == 404, attempt
    assert "root:" not in response.text


@pytest.mark.parametrize(
    "rel",
    [
        "..",
        "../etc",
        "a/../../etc",
        "./x",
        "%2e%2e/etc",
        "a\\..\\..",
        "x\x00",
        "outside-link",
        "outside-link/passwd",
    ],
)
def test_resolve_refuses_paths_that_leave_the_prefix(ui_prefix, rel):
    from marin.ui.paths import NotFound, resolve

    with pytest.raises(NotFound):
        resolve(str(ui_prefix[0]), rel)


def test_hostile_records_render_as_text(client):
    evil = client.get("/", params={"q": "evil"}).text
    assert "<img src=x" not in evil and "&lt;img src=x onerror=alert(1)&gt;" in evil
    rel = re.search(r'href="/output/([^"]+)"', evil).group(1)
    page = client.get(f"/output/{rel}").text
    assert "<script>alert" not in page and "&lt;script&gt;alert(&#39;log&#39;)" in page
    lineage = client.get(f"/lineage/{rel}").text
    assert "</script><script>alert(2)" not in lineage and "<img src=x" not in lineage
    raw = _rel(client, "raw")
    records = client.get(f"/data/{raw}/data/a.jsonl").text
    assert "<script>alert('record')" not in records and "&lt;script&gt;" in records
    failed = client.get(f"/output/{_rel(client, 'broken', 'FAILED')}").text
    assert "<b>not bold</b>" not in failed and "&lt;b&gt;not bold&lt;/b&gt;" in failed


def test_oversized_record_is_not_parsed(tmp_path):
    from marin.ui.paths import read_json_capped

    big = tmp_path / "big.json"
    big.write_text(json.dumps({"x": "y" * 1000}))
    assert read_json_capped(str(big), cap=100) is None
    assert read_json_capped(str(big), cap=10_000) == {"x": "y" * 1000}


def test_token_is_required_on_every_request_and_set_from_the_query(ui_prefix):
    app = create_app(UiConfig(str(ui_prefix[0]), token="s3cret"))
    with TestClient(app) as c:
        assert c.get("/").status_code == 401
        assert c.get("/static/vendor/htmx.min.js").status_code == 401
        assert c.get("/", params={"token": "wrong"}).status_code == 401
        first = c.get("/", params={"token": "s3cret", "q": "raw"}, follow_redirects=False)
        assert first.status_code == 303 and first.headers["location"] == "/?q=raw"
        assert c.get("/").status_code == 200  # the cookie now carries it


def test_quote_round_trips_names_with_spaces(client):
    assert client.get("/output/" + quote("no such output")).status_code == 404


def flaky(flag: str) -> dict:
    """Fails until the file `flag` exists."""
    from pathlib import Path

    if not Path(flag).exists():
        raise RuntimeError("not yet")
    return {"headline": {"metric": "score", "value": 7}}


def test_outputs_page_follows_new_and_rerun_outputs_despite_its_cache(tmp_path):
    import functools

    from fray.cluster import ThreadCluster
    from marin.execution.errors import StepFailedError
    from marin.execution.step_runner import StepRunner
    from marin.execution.step_spec import StepSpec

    prefix, flag = tmp_path / "out", tmp_path / "flag"
    runner = StepRunner(prefix=str(prefix), cluster=ThreadCluster(), progress=False)
    step = StepSpec(name="flaky", fn=functools.partial(flaky, str(flag)))
    with pytest.raises(StepFailedError):
        runner.run([step])
    with TestClient(create_app(UiConfig(str(prefix)))) as c:
        assert c.get("/").text.count('data-state="FAILED"') == 1
        flag.write_text("go")
        runner.run([step], force_run_failed=True)
        runner.run([StepSpec(name="later", fn=functools.partial(flaky, str(flag)))])
        page = c.get("/").text
        assert page.count('data-state="SUCCESS"') == 2 and "FAILED" not in page.split("<tbody>")[1]
        assert "score = 7" in page


def test_an_oversized_status_record_is_shown_unread(tmp_path):
    from fray.cluster import ThreadCluster
    from marin.execution.step_runner import StepRunner
    from marin.execution.step_spec import StepSpec
    from marin.ui.paths import RECORD_CAP

    prefix = tmp_path / "out"
    StepRunner(prefix=str(prefix), cluster=ThreadCluster(), progress=False).run(
        [StepSpec(name="fine", fn=dict)]
    )
    huge = prefix / "huge"
    huge.mkdir()
    (huge / ".executor_status").write_bytes(b'{"state": "SUCCESS", "pad": "' + b"x" * RECORD_CAP + b'"}')
    with TestClient(create_app(UiConfig(str(prefix)))) as c:
        page = c.get("/").text
        assert (
            'data-state="UNREADABLE"' in page and "larger than 4 MiB" not in page
        )  # the note is on its page
        assert 'data-state="SUCCESS"' in page
        output = c.get("/output/huge")
        assert output.status_code == 200 and "larger than 4 MiB" in output.text


def write_lines(output_path: str) -> dict:
    """A step that writes a jsonl shard through fsspec, wherever its output lives."""
    import storage

    storage.write_bytes(
        storage.join(output_path, "rows.jsonl"), b"".join(b'{"n": %d}\n' % i for i in range(30))
    )
    return {"headline": {"metric": "rows", "value": 30}}


def test_an_fsspec_prefix_is_served_like_a_local_one():
    from fray.cluster import ThreadCluster
    from marin.execution.step_runner import StepRunner
    from marin.execution.step_spec import StepSpec

    prefix = "memory://marin-ui-test"
    base = StepSpec(name="base", fn=write_lines)
    StepRunner(prefix=prefix, cluster=ThreadCluster(), progress=False).run(
        [StepSpec(name="top", fn=write_lines, deps=[base])]
    )
    with TestClient(create_app(UiConfig(prefix))) as c:
        page = c.get("/").text
        assert page.count('data-state="SUCCESS"') == 2 and "rows = 30" in page
        rel = _rel(c, "top")
        assert "base" in c.get(f"/output/{rel}").text
        lineage = c.get(f"/lineage/{rel}").text
        assert lineage.count('<li><a href="/output/') == 2
        rows = c.get(f"/data/{rel}/rows.jsonl", params={"start": 25})
        assert (
            rows.status_code == 200 and "&#34;n&#34;: 29" in rows.text and "&#34;n&#34;: 24" not in rows.text
        )
        assert c.get(f"/data/{rel}/../../x").status_code == 404
        assert c.get("/output/nothing-here").status_code == 404


def test_package_data_ships_every_template_and_asset():
    import fnmatch
    import tomllib
    from pathlib import Path

    import marin.ui

    root = Path(marin.ui.__file__).parent
    globs = tomllib.loads((root.parents[2] / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]
    files = [
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and p.suffix != ".py" and "__pycache__" not in p.parts
    ]
    assert len(files) > 15
    assert not [
        f
        for f in files
        if not any(fnmatch.fnmatch(f, g) and f.count("/") == g.count("/") for g in globs["marin.ui"])
    ]


def test_a_curation_outputs_stats_are_shown_on_its_data_and_output_pages(tmp_path):
    from marin.execution.lazy import lower
    from marin.execution.step_runner import StepRunner
    from marin.experiment.curation import dedup_exact
    from zephyr import ZephyrConfig

    docs = tmp_path / "docs.jsonl"
    docs.write_text(
        "".join(json.dumps({"text": t}) + "\n" for t in ["a cat", "a dog", "a cat", "a <b>cow</b>"])
    )
    prefix = tmp_path / "out"
    spec = lower(dedup_exact("curated/dedup", str(docs), zephyr=ZephyrConfig(backend="sync", quiet=True)))
    out = StepRunner(prefix=str(prefix), progress=False).run([spec]).output_path(spec)
    stats = json.loads((prefix / "curated" / out.rsplit("/", 1)[-1] / "stats.json").read_text())
    assert (stats["documents_in"], stats["documents_out"]) == (4, 3)
    rel = out[len(str(prefix)) + 1 :]
    with TestClient(create_app(UiConfig(str(prefix)))) as c:
        for page in (c.get(f"/data/{rel}").text, c.get(f"/output/{rel}").text):
            heading = r'<h2 id="stats">Curation stats \(stats.json\)</h2>\s*'
            shown = re.search(heading + r'<pre class="json">(.*?)</pre>', page, re.S)
            assert shown, page
            assert "&#34;documents_in&#34;: 4" in shown.group(
                1
            ) and "&#34;documents_out&#34;: 3" in shown.group(1)


SLEEPS = """
import time
from pathlib import Path
from marin.execution.step_spec import StepSpec

def nap(path):
    Path(path, "started").write_text("yes")
    time.sleep(120)

napper = StepSpec(name="napper", fn=nap, output_path="napper")
"""


def test_an_output_whose_runner_was_killed_shows_interrupted_on_its_page(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    (tmp_path / "exp.py").write_text(SLEEPS)
    runner = subprocess.Popen(
        [sys.executable, "-m", "marin.cli", "run", "exp.py", "--prefix", str(tmp_path / "out")],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "MARIN_PREFIX": ""},
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while not (tmp_path / "out" / "napper" / "started").exists():
        assert runner.poll() is None and time.monotonic() < deadline, "the step never started"
        time.sleep(0.05)
    os.killpg(runner.pid, signal.SIGKILL)  # the runner and its step die without recording an end
    runner.wait()
    with TestClient(create_app(UiConfig(str(tmp_path / "out")))) as c:
        assert 'data-state="INTERRUPTED"' in c.get("/", params={"state": "INTERRUPTED"}).text
        page = c.get("/output/napper").text
        assert '<span class="state s-INTERRUPTED">INTERRUPTED</span> napper' in page
        assert "died before finishing" in page
        events = re.search(r'<table class="events">.*?</table>', page, re.S).group(0)
        assert events.count('class="state s-RUNNING"') == 1  # the attempt that never recorded its end


def _replica_1_dies_once(path: str) -> dict:
    """A gang step whose rank 1 is SIGKILLed on its first attempt (as a preempted node's worker dies)."""
    import os
    import signal

    marker = os.path.join(path, "rank1-died")
    if os.environ["RANK"] == "1" and not os.path.exists(marker):
        open(marker, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    return {"rank": int(os.environ["RANK"])}


def test_a_preemption_is_shown_in_the_output_pages_events(ray_nodes, tmp_path):
    from fray.cluster import RayCluster, ResourceConfig
    from marin.execution.step_runner import StepRunner
    from marin.execution.step_spec import StepSpec

    step = StepSpec(name="gang", fn=_replica_1_dies_once, resources=ResourceConfig.with_cpu(1, replicas=2))
    cluster = RayCluster(max_retries=2)
    try:
        out = StepRunner(prefix=str(tmp_path), cluster=cluster, progress=False).run([step]).output_path(step)
    finally:
        cluster.shutdown()
    preempted = json.loads((tmp_path / out.rsplit("/", 1)[-1] / ".executor_status").read_text())["events"][1][
        "preempted"
    ]
    with TestClient(create_app(UiConfig(str(tmp_path)))) as c:
        page = c.get(f"/output/{out.rsplit('/', 1)[-1]}").text
    assert "preempted 1x" in page  # the detail line
    assert (
        f'<span class="preempted">preempted: lost replica 1 on node {preempted["node"]}; retry 1 of 2</span>'
        in page
    )
    assert "worker or node died" in page


def test_runs_page_draws_log_x_when_asked(pipeline_client):
    runs = pipeline_client.get("/runs").text
    rels = re.findall(r'class="pick-run" name="o" value="([^"]+)"', runs)
    for logx in ("1", None):
        params = [("o", rels[0]), ("o", rels[1])] + ([("logx", logx)] if logx else [])
        page = pipeline_client.get("/runs", params=params).text
        settings = json.loads(re.search(r'id="runs-settings">(.*?)</script>', page, re.S).group(1))
        assert settings["logx"] is (logx == "1")
        assert ('name="logx" value="1" checked' in page) is (logx == "1")
    payload = json.loads(re.search(r'id="runs-data">(.*?)</script>', page, re.S).group(1))
    for run in payload:  # a log axis can place every point: no step or token count of 0
        for points in run["series"].values():
            assert points and all(step > 0 and tokens > 0 for step, tokens, _ in points)


def _stand_in_evaluation(acc: list[float], output_path: str) -> dict:
    """A step that writes an evaluation's results.json: one accuracy per model, with its Wilson interval."""
    from marin.evaluation import stats
    from marin.evaluation.results import Aggregation, EvaluationResults, MetricResult, ModelRecord

    metric = MetricResult.named(stats.accuracy(acc), "acc", Aggregation.MEAN)
    results = EvaluationResults(
        model=ModelRecord(kind="folder", location="/models/m", label=f"model-{sum(acc):g}"),
        harness={"story_endings": {"acc": metric}},
    )
    (Path(output_path) / "results.json").write_bytes(results.to_bytes())
    return {"headline": {"metric": "story_endings/acc", **metric.to_json()}}


def test_evaluations_page_ranks_models_side_by_side_by_the_lower_bound(tmp_path):
    import functools

    from marin.execution.step_runner import StepRunner
    from marin.execution.step_spec import StepSpec

    # a: 0.6 of 10 items (wide interval); b: 0.55 of 200 items (narrow): b ranks first on its lower bound
    scores = {"eval/a": [1.0] * 6 + [0.0] * 4, "eval/b": [1.0] * 110 + [0.0] * 90}
    steps = [StepSpec(name, functools.partial(_stand_in_evaluation, acc)) for name, acc in scores.items()]
    StepRunner(prefix=str(tmp_path), progress=False).run(steps)
    with TestClient(create_app(UiConfig(str(tmp_path)))) as c:
        page = c.get("/evals").text
    section = page[page.index("Side by side") :]
    assert section.index("eval/b") < section.index("eval/a")
    assert section.count('class="interval-bar"') == 2 and "0.6 [0.3127, 0.8318] n=10" in section


def test_runs_page_draws_each_runs_declared_schedule_where_its_logged_lr_lies(pipeline_client):
    report = _rel(pipeline_client, "reports/lr")
    page = pipeline_client.get("/runs", params={"o": report}).text
    assert 'id="chart-lr_schedule"' in page
    for run in json.loads(re.search(r'id="runs-data">(.*?)</script>', page, re.S).group(1)):
        declared = {step: lr for step, _, lr in run["series"]["lr_schedule"]}
        logged = {step: lr for step, _, lr in run["series"]["lr"]}
        assert sorted(declared) == list(range(1, 7)) and declared == logged


def test_a_train_output_shows_its_model_and_hardware_flops(pipeline_client, pipeline):
    rel = _rel(pipeline_client, "checkpoints/nano-lr")
    flops = json.loads((pipeline[1] / rel / ".artifact.json").read_text())["result"]["flops"]
    page = pipeline_client.get(f"/output/{rel}").text
    shown = re.search(r'<td id="compute">([^<]*)</td>', page).group(1)
    assert shown.startswith(f"{flops['model']:.3g} / {flops['hardware']:.3g} ({flops['ratio']:.1%})")
