"""Marina's data page over a score step: histograms per source and documents paged by score bucket."""

from __future__ import annotations

import json
import re

import pytest
from starlette.testclient import TestClient

from marin.curation.scorers import RandomScore
from marin.execution.lazy import lower
from marin.execution.step_runner import StepRunner
from marin.experiment.curation import dedup_exact, score_documents
from marin.ui.app import UiConfig, create_app
from zephyr import ZephyrConfig

SYNC = ZephyrConfig(backend="sync", quiet=True)


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    folder = tmp_path_factory.mktemp("scores")
    docs = folder / "docs.jsonl"
    docs.write_text(
        "".join(
            json.dumps(
                {"id": f"d{k}", "url": f"https://site{k % 2}.example/{k}", "text": f"document number {k}"}
            )
            + "\n"
            for k in range(40)
        )
    )
    deduped = dedup_exact("ui/docs", str(docs), zephyr=SYNC)
    scores = score_documents("ui/scores", deduped, classifier=RandomScore(3), source_key="url", zephyr=SYNC)
    run = StepRunner(prefix=str(folder / "prefix"), progress=False).run([lower(scores)])
    path = run.output_path(lower(scores))
    rows = []
    for line in (
        __import__("zstandard")
        .ZstdDecompressor()
        .stream_reader(open(f"{path}/part-00000-of-00001.jsonl.zst", "rb"))
        .read()
        .splitlines()
    ):
        row = json.loads(line)
        rows.append((row["attributes"]["quality"], row["id"]))
    with TestClient(create_app(UiConfig(str(folder / "prefix")))) as client:
        yield client, path.split("/prefix/", 1)[1], sorted(rows)


def test_the_data_page_shows_score_histograms_per_source(scored):
    client, rel, _ = scored
    page = client.get(f"/data/{rel}")
    assert page.status_code == 200
    assert "Scores: quality by source" in page.text
    sources = re.findall(r'<tr class="source"><td>([^<]+)</td><td>(\d+)</td>', page.text)
    assert sources == [("all", "40"), ("site0.example", "20"), ("site1.example", "20")]


@pytest.mark.parametrize("bucket", ["lowest", "median", "highest"])
def test_documents_page_by_score_bucket_with_their_text(scored, bucket):
    client, rel, rows = scored
    page = client.get(f"/data/{rel}", params={"bucket": bucket, "size": 5})
    assert page.status_code == 200
    shown = re.findall(
        r"<p>(d\d+) · quality ([0-9.]+)</p><pre class=\"record\">document number (\d+)</pre>", page.text
    )
    assert len(shown) == 5 and all(i == f"d{n}" for i, _, n in shown)
    ids = [i for i, _, _ in shown]
    if bucket == "lowest":
        assert ids == [i for _, i in rows[:5]]
    elif bucket == "highest":
        assert ids == [i for _, i in rows[::-1][:5]]
    else:
        assert ids[0] == rows[20][1]
